"""evals.jsonl of a training run: one line per online eval ([orchestrator.eval]), written by the
orchestrator of the trainer plugin and read by the trainer (metrics.jsonl, W&B), the launcher (one
line on the terminal) and the training reader (the eval curve).

A line: `{"step": N, "policy_step": N, "eval/time_s": s, "eval/<env>/reward/mean": m,
"eval/<env>/reward/std": s, "eval/<env>/num_rollouts": n, "eval/<env>/error_rate": e}`; the eval run
of each environment is the folder online_evals/step_N/<env>/ (TrainingRunLayout.eval_run_dir).
It is read by records.json_lines' rule: a torn last line (an eval being written) is left out, any other
bad line is a JsonLinesError naming file:line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .json_lines import iter_json_lines

PREFIX = "eval/"
MEAN_SUFFIX = "/reward/mean"


def eval_env_names(line: dict[str, Any]) -> list[str]:
    """The environments one line has a mean reward for, in the order they were written."""
    return [key[len(PREFIX): -len(MEAN_SUFFIX)] for key in line if key.startswith(PREFIX) and key.endswith(MEAN_SUFFIX)]


def eval_mean(line: dict[str, Any], env: str) -> float | None:
    value = line.get(f"{PREFIX}{env}{MEAN_SUFFIX}")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def eval_summary_line(line: dict[str, Any]) -> str:
    """`eval step 5: reverse-text reward 0.312 ± 0.10 (8 rollouts, 14.2s)` (one part per environment)."""

    def number(value: Any, fmt: str) -> str:
        return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"

    seconds = number(line.get(f"{PREFIX}time_s"), ".1f")
    parts = []
    for env in eval_env_names(line):
        key = f"{PREFIX}{env}"
        parts.append(f"{env} reward {number(line.get(key + MEAN_SUFFIX), '.3f')} ± "
                     f"{number(line.get(key + '/reward/std'), '.2f')} "
                     f"({line.get(key + '/num_rollouts', 0)} rollouts, {seconds}s)")
    policy = line.get("policy_step")
    note = f" (adapter of step {policy})" if policy is not None and policy != line.get("step") else ""
    return f"eval step {line.get('step')}{note}: " + "; ".join(parts)


def read_evals(path: Path) -> list[dict[str, Any]]:
    """The lines of evals.jsonl that name their step (none when it does not exist)."""
    return [line for line in iter_json_lines(path) if isinstance(line.get("step"), int)]
