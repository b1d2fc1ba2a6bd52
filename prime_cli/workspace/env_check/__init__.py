"""`prime env check`: find a broken reward before paying for rollouts.

No policy model is called; judge rubrics are skipped, or scored by the judge model `-m` names
(judges.py). The environment is loaded as `prime eval run` loads it; on a sample of its eval
split the dataset and the prompt/parser agreement are checked, tool schemas and one scripted
`env_response` turn too, and the rubric scores a reference reply and adversarial replies through the
environment's own rollout and group scoring. Every problem is one line; any problem fails the check.
What the check cannot judge (a reference reply it cannot trust, skipped judges, an EnvGroup child without
rows: trust.py) is one "not checked: <why>" line, which does not fail it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .dataset_checks import (
    format_not_checked,
    instructions,
    prompt_parser_problems,
    question_text,
    raw_type_problems,
    row_problems,
)
from .judges import JudgeFlags, judge_specs, open_judges
from .rollouts import best_paid, judge_rubrics, score_rows, skip_judges
from .trust import reference_doubts, sample_rows
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
from .writings import KINDS, Writer, find_writer, replies_for, tag_writers


@dataclass
class TaskPlan:
    """One task's rows (all rows, or an EnvGroup child's), its environment and how its reference is written."""

    label: str  # "task NAME: " in a group, else ""
    env: Any
    indices: list[int]
    writer: Writer
    doubts: list[str]  # why its reference reply may not be a right reply (trust.py)


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
    not_checked: list[str] = field(default_factory=list)  # what the check could not judge, and why: no problem

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "ok": self.ok, "examples": self.examples,
                "reference_writing": self.reference_writing, "kinds": {k: v for k, v in KINDS.items()},
                "weights": self.weights, "table": self.table, "skipped": self.skipped, "errored": self.errored,
                "problems": self.problems, "notes": self.notes, "not_checked": self.not_checked}


WRITING_SAMPLE = 3  # rows whose references choose the writing of a plain parser's reference (best_paid)


def check_environment(env_id: str, env_args: dict[str, Any] | None = None, num_examples: int = 20,
                      judge: JudgeFlags | None = None) -> CheckReport:
    """Raises EnvConfigError when the environment cannot be loaded (bad name or arguments) or the judge
    model flags are wrong (ClientConfigError). Without `judge`, judge rubrics are skipped."""
    from prime_cli.envs.errors import EnvConfigError, UserInputError  # lazy: already loaded
    from prime_cli.envs.loader import load_environment  # lazy: already loaded

    from ..names import check_env_id  # lazy: already loaded

    env_id = check_env_id(env_id)
    specs = judge_specs(judge) if judge else None  # bad -m/-b/-k/-e fail before the environment loads
    try:
        env = load_environment(env_id, **(env_args or {}))
    except UserInputError:
        raise
    except Exception as exc:  # the environment's own code failed: one line, not a traceback
        raise EnvConfigError(f"{env_id}: load_environment() raised {type(exc).__name__}: {exc}") from exc
    report = CheckReport(env_id)
    try:
        rows, report.not_checked = sample_rows(env, num_examples)
    except Exception as exc:
        report.problems.append(f"the eval dataset does not load: {type(exc).__name__}: {exc}")
        return report
    report.examples = len(rows)
    if not rows:
        report.problems.append("the eval dataset is empty")
        return report
    report.problems += row_problems(rows) + raw_type_problems(env, num_examples)
    replies, plans = _replies(env, rows, report)
    report.problems += schema_problems(env.oai_tools or [])
    report.notes += schema_notes(env.oai_tools or [])
    pool = None
    if not judge_rubrics(env.rubric):
        if judge:
            report.notes.append(f"-m {judge.model}: the environment has no JudgeRubric, so prime called no judge "
                                "model (a reward function that calls a model itself still does)")
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
    group = len(plans) > 1
    owners: dict[str, set[str]] = {}
    for plan in plans if group else []:
        for name in plan.env.rubric.get_reward_func_names():
            owners.setdefault(name, set()).add(scored[plan.indices[0]].task)
    report.table = score_table(scored, env.rubric.get_reward_func_names(), owners)
    report.skipped = skipped_functions(scored)
    report.errored = errored_functions(scored)
    for name in report.skipped:
        report.notes.append(f"{name} is a judge-model reward: skipped (pass -m MODEL to score it with a judge model)")
    report.problems += error_problems(scored)
    for plan in plans:
        subset = [scored[i] for i in plan.indices]
        names = plan.env.rubric.get_reward_func_names()
        table = score_table(subset, names) if group else report.table
        weights = weights_of(plan.env.rubric)
        problems, not_checked = function_problems(table, weights, report.skipped, _describe(plan.writer.how),
                                                  prefix_share(subset), plan.doubts)
        total_problems, total_not_checked = reward_problems(subset, table, weights, report.skipped, plan.doubts)
        report.problems += [plan.label + line for line in problems + total_problems]
        report.not_checked += [plan.label + line for line in not_checked + total_not_checked]
    return report


async def _scored(env: Any, rows: list[dict[str, Any]], replies: list[dict[str, str | None]], pool: Any) -> Any:
    try:
        return await score_rows(env, rows, replies)
    finally:
        if pool is not None:  # the judge's clients, closed in the loop that used them
            await pool.aclose()


def _replies(env: Any, rows: list[dict[str, Any]],
             report: CheckReport) -> tuple[list[dict[str, str | None]], list[TaskPlan]]:
    """Every row's replies, written for the parser of the row's task (an EnvGroup has one per task), and
    each task's plan; the prompt/parser problems found on the way go into the report."""
    by_task: dict[str, list[int]] = {}
    for i, row in enumerate(rows):  # one plan for all rows, unless an EnvGroup routes them to its children
        by_task.setdefault(str(row.get("task") or "") if hasattr(env, "get_env_for_task") else "", []).append(i)
    group = hasattr(env, "get_env_for_task") and len(by_task) > 1
    replies: list[dict[str, str | None]] = [{} for _ in rows]
    writings = []
    plans: list[TaskPlan] = []
    for task, indices in by_task.items():
        child = env.get_env_for_task(task) if hasattr(env, "get_env_for_task") else env
        task_rows = [rows[i] for i in indices]
        prompt = instructions(child, task_rows)
        answers = [str(r.get("answer") or "") for r in task_rows]
        writer = find_writer(child.parser, prompt, answers)
        chosen_by_reward = False
        if (choices := tag_writers(writer)) and not judge_rubrics(child.rubric):  # no judge is called for this
            writer = asyncio.run(best_paid(child, task_rows[:WRITING_SAMPLE], choices))
            chosen_by_reward = writer.how != "as is"
        label = f"task {task}: " if group else ""
        writings.append(f"{label}{_describe(writer.how)}")
        first_answer = next((a for a in answers if a.strip()), "")
        problems = prompt_parser_problems(prompt, child.parser, writer, first_answer, question_text(task_rows[0]))
        report.problems += [label + p for p in problems]
        if line := format_not_checked(prompt, child.parser):
            report.not_checked.append(label + line)
        if chosen_by_reward:
            report.notes.append(f"{label}the reference is written {_describe(writer.how)}: the writing the reward pays "
                                "most (a plain parser has none of its own)")
        elif first_answer and not writer.reads_back(first_answer):
            report.notes.append(f"{label}the parser does not read the answer back from any writing tried; the "
                                f"reference is written {_describe(writer.how)}")
        for i, kinds in zip(indices, replies_for(task_rows, writer), strict=True):
            replies[i] = kinds
        plans.append(TaskPlan(label, child, indices, writer, reference_doubts(child, task_rows, writer)))
    report.reference_writing = "; ".join(writings)
    return replies, plans


def _describe(how: str) -> str:
    if how == "xml":
        return "in the parser's own XML format"
    if how.startswith("tag:"):
        return f"inside <{how[4:]}> tags"
    if how == "boxed":
        return "inside \\boxed{}"
    return "as is"


__all__ = ["REWARD", "CheckReport", "JudgeFlags", "check_environment"]
