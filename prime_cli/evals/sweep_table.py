"""The checkpoint sweep's result: one row per evaluated model (the base, then each step), the best one
marked; printed as a rich table or as one JSON line (`--json`)."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from .row_values import example_key, reward_value
from .summary import pass_at_k


@dataclass
class SweepRow:
    label: str  # "base" or the adapter's name (step_N)
    step: int | None  # None for the base model
    model: str  # the model name the run was sent to
    status: str
    run_dir: str | None
    num_rollouts: int
    avg_reward: float | None
    std_reward: float | None
    k: int  # rollouts per example
    pass_at_k: float | None  # an example passes when one of its k rollouts reaches the pass threshold


def sweep_row(label: str, step: int | None, model: str, outcome: Any, rollouts_per_example: int,
              pass_threshold: float) -> SweepRow:
    """The row of one finished eval (`outcome` is the runner's EvalOutcome)."""
    groups: dict[Any, list[bool]] = defaultdict(list)
    for row in outcome.rows:
        groups[example_key(row.get("example_id"))].append(reward_value(row.get("reward")) >= pass_threshold)
    k = rollouts_per_example
    scores = [pass_at_k(len(passed), sum(passed), k) for passed in groups.values() if len(passed) >= k]
    summary = outcome.summary
    return SweepRow(label, step, model, outcome.status, str(outcome.run_dir) if outcome.run_dir else None,
                    int(summary.get("num_rollouts") or 0), summary.get("avg_reward"), summary.get("std_reward"),
                    k, statistics.fmean(scores) if scores else None)


def best_index(rows: list[SweepRow]) -> int | None:
    """The row with the highest mean reward (the earliest on a tie)."""
    scored = [(row.avg_reward, -i) for i, row in enumerate(rows) if row.avg_reward is not None]
    return -max(scored)[1] if scored else None


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_table(rows: list[SweepRow], weights_dir: Path, stream: IO[str] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    best = best_index(rows)
    k = rows[0].k if rows else 1
    table = Table(title=f"Checkpoint sweep of {weights_dir}", title_justify="left")
    for name, justify in (("step", "left"), ("mean reward", "right"), ("std", "right"), (f"pass@{k}", "right"),
                          ("rollouts", "right"), ("status", "left"), ("", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, row in enumerate(rows):
        table.add_row(row.label, _number(row.avg_reward), _number(row.std_reward), _number(row.pass_at_k),
                      str(row.num_rollouts), row.status, "<- best" if i == best else "",
                      style="bold green" if i == best else None)
    console = Console(file=stream) if stream is not None else Console()
    console.print(table)
    if best is not None:
        console.print(f"Best: {rows[best].label} (mean reward {_number(rows[best].avg_reward)}); "
                      f"runs saved in {Path(rows[best].run_dir).parent.parent if rows[best].run_dir else '-'}",
                      soft_wrap=True, highlight=False)


def print_json(rows: list[SweepRow], weights_dir: Path, stream: IO[str]) -> None:
    """One NDJSON `sweep` event after the runs' own events."""
    best = best_index(rows)
    event = {"event": "sweep", "weights_dir": str(weights_dir), "rows": [asdict(row) for row in rows],
             "best": rows[best].label if best is not None else None}
    stream.write(json.dumps(event) + "\n")
    stream.flush()
