"""`prime env check`: find a broken reward before paying for rollouts.

No policy model is called; judge rubrics are skipped, or scored by the judge model `-m` names
(judges.py). The environment is loaded as `prime eval run` loads it; on a sample of its eval
split the dataset and the prompt/parser agreement are checked, tool schemas and one scripted
`env_response` turn too, and the rubric scores a reference reply and adversarial replies through the
environment's own rollout and group scoring. Every problem is one line; any problem fails the check.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .dataset_checks import (
    instructions,
    prompt_parser_problems,
    question_text,
    raw_type_problems,
    row_problems,
)
from .judges import JudgeFlags, judge_specs, open_judges
from .rollouts import judge_rubrics, score_rows, skip_judges
from .turn_checks import schema_notes, schema_problems, scripted_turn_problems
from .verdict import (
    REWARD,
    error_problems,
    errored_functions,
    function_problems,
    prefix_share,
    reward_problems,
    score_table,
    skipped_functions,
    weights_of,
)
from .writings import KINDS, find_writer, replies_for


@dataclass
class CheckReport:
    env_id: str
    examples: int = 0
    reference_writing: str = ""
    weights: dict[str, float] = field(default_factory=dict)
    table: dict[str, dict[str, float | None]] = field(default_factory=dict)  # function -> kind -> mean
    skipped: list[str] = field(default_factory=list)
    errored: list[str] = field(default_factory=list)  # functions that raised on some rollout (a judge that failed)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "ok": self.ok, "examples": self.examples,
                "reference_writing": self.reference_writing, "kinds": {k: v for k, v in KINDS.items()},
                "weights": self.weights, "table": self.table, "skipped": self.skipped, "errored": self.errored,
                "problems": self.problems, "notes": self.notes}


def check_environment(env_id: str, env_args: dict[str, Any] | None = None, num_examples: int = 20,
                      judge: JudgeFlags | None = None) -> CheckReport:
    """Raises EnvConfigError when the environment cannot be loaded (bad name or arguments) or the judge
    model flags are wrong (ClientConfigError). Without `judge`, judge rubrics are skipped."""
    from prime_cli.envs.errors import EnvConfigError
    from prime_cli.envs.loader import load_environment

    from ..names import check_env_id

    env_id = check_env_id(env_id)
    specs = judge_specs(judge) if judge else None  # bad -m/-b/-k/-e fail before the environment loads
    try:
        env = load_environment(env_id, **(env_args or {}))
    except EnvConfigError:
        raise
    except Exception as exc:  # the environment's own code failed: one line, not a traceback
        raise EnvConfigError(f"{env_id}: load_environment() raised {type(exc).__name__}: {exc}") from exc
    report = CheckReport(env_id)
    try:
        rows = env.get_eval_dataset(n=num_examples)
    except Exception as exc:
        report.problems.append(f"the eval dataset does not load: {type(exc).__name__}: {exc}")
        return report
    report.examples = len(rows)
    if not rows:
        report.problems.append("the eval dataset is empty")
        return report
    report.problems += row_problems(rows) + raw_type_problems(env, num_examples)
    replies = _replies(env, rows, report)
    report.problems += schema_problems(env.oai_tools or [])
    report.notes += schema_notes(env.oai_tools or [])
    pool = None
    if not judge_rubrics(env.rubric):
        if judge:
            report.notes.append(f"-m {judge.model}: the environment has no judge rubric; no model was called")
    elif specs:
        pool = open_judges(env.rubric, specs, judge.max_retries if judge else None)
    else:
        skip_judges(env.rubric)
    turn_problems, turn_notes = asyncio.run(scripted_turn_problems(env, rows, replies))
    report.problems += turn_problems
    report.notes += turn_notes
    try:
        scored = asyncio.run(_scored(env, rows, replies, pool))
    except Exception as exc:  # a RubricError (e.g. a reward function asking for an unknown argument)
        report.problems.append(f"scoring raised {type(exc).__name__}: {exc}")
        return report
    report.weights = weights_of(env.rubric)
    report.table = score_table(scored, env.rubric.get_reward_func_names())
    report.skipped = skipped_functions(scored)
    report.errored = errored_functions(scored)
    for name in report.skipped:
        report.notes.append(f"{name} is a judge-model reward: skipped (pass -m MODEL to score it with a judge model)")
    report.problems += error_problems(scored)
    report.problems += function_problems(report.table, report.weights, report.skipped, report.reference_writing,
                                         prefix_share(scored))
    report.problems += reward_problems(scored, report.table)
    return report


async def _scored(env: Any, rows: list[dict[str, Any]], replies: list[dict[str, str | None]], pool: Any) -> Any:
    try:
        return await score_rows(env, rows, replies)
    finally:
        if pool is not None:  # the judge's clients, closed in the loop that used them
            await pool.aclose()


def _replies(env: Any, rows: list[dict[str, Any]], report: CheckReport) -> list[dict[str, str | None]]:
    """Every row's replies, written for the parser of the row's task (an EnvGroup has one per task);
    the prompt/parser problems found on the way go into the report."""
    by_task: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_task.setdefault(str(row.get("task") or ""), []).append(i)
    group = hasattr(env, "get_env_for_task") and len(by_task) > 1
    replies: list[dict[str, str | None]] = [{} for _ in rows]
    writings = []
    for task, indices in by_task.items():
        child = env.get_env_for_task(task) if hasattr(env, "get_env_for_task") else env
        task_rows = [rows[i] for i in indices]
        prompt = instructions(child, task_rows)
        answers = [str(r.get("answer") or "") for r in task_rows]
        writer = find_writer(child.parser, prompt, answers)
        label = f"task {task}: " if group else ""
        writings.append(f"{label}{_describe(writer.how)}")
        first_answer = next((a for a in answers if a.strip()), "")
        problems = prompt_parser_problems(prompt, child.parser, writer, first_answer, question_text(task_rows[0]))
        report.problems += [label + p for p in problems]
        if first_answer and not writer.reads_back(first_answer):
            report.notes.append(f"{label}the parser does not read the answer back from any writing tried; the "
                                f"reference is written {_describe(writer.how)}")
        for i, kinds in zip(indices, replies_for(task_rows, writer), strict=True):
            replies[i] = kinds
    report.reference_writing = "; ".join(writings)
    return replies


def _describe(how: str) -> str:
    if how == "xml":
        return "in the parser's own XML format"
    if how.startswith("tag:"):
        return f"inside <{how[4:]}> tags"
    if how == "boxed":
        return "inside \\boxed{}"
    return "as is"


__all__ = ["REWARD", "CheckReport", "JudgeFlags", "check_environment"]
