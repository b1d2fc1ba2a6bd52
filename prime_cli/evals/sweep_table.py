"""The checkpoint sweep's result: one row per evaluated model (the base, then each step), the best one
marked; printed as a rich table or as one JSON line (`--json`)."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from prime_cli.results.intervals import (
    examples_needed,
    format_p,
    paired_comparison,
    shown_bounds,
    signed,
)
from prime_cli.results.pass_k import pass_at_k, pass_hat_k
from prime_cli.results.row_values import example_key, reward_value
from prime_cli.runs.status import RunStatus


@dataclass
class SweepRow:
    label: str  # "base" or the adapter's name (step_N)
    step: int | None  # None for the base model
    model: str  # the model name the run was sent to
    status: RunStatus
    run_dir: str | None
    num_rollouts: int
    avg_reward: float | None
    std_reward: float | None
    k: int  # rollouts per example
    pass_at_k: float | None  # an example passes when one of its k rollouts reaches the pass threshold
    pass_hat_k: float | None  # ... when all k of them do (pass^k)
    ci95: list[float] | None = None  # the mean reward's 95% interval, clustered by example
    vs_base: dict[str, Any] | None = None  # paired B - base on shared examples: difference, ci95, p_value
    scores: dict[Any, list[float]] = field(default_factory=dict, repr=False)  # per example (not in the JSON)


def sweep_row(label: str, step: int | None, model: str, outcome: Any, rollouts_per_example: int,
              pass_threshold: float) -> SweepRow:
    """The row of one finished eval (`outcome` is the runner's EvalOutcome)."""
    per_example: dict[Any, list[float]] = defaultdict(list)
    for row in outcome.rows:
        if not row.get("error"):  # an errored rollout is counted in the summary, never scored as a fail
            per_example[example_key(row.get("example_id"))].append(reward_value(row.get("reward")))
    k = rollouts_per_example
    counts = [(len(rewards), sum(r >= pass_threshold for r in rewards)) for rewards in per_example.values()
              if len(rewards) >= k]
    at_k = [pass_at_k(n, c, k) for n, c in counts]
    hat_k = [pass_hat_k(n, c, k) for n, c in counts]
    summary = outcome.summary
    interval = ((summary.get("ci95") or {}).get("reward")) or None
    return SweepRow(label, step, model, outcome.status, str(outcome.run_dir) if outcome.run_dir else None,
                    int(summary.get("num_rollouts") or 0), summary.get("avg_reward"), summary.get("std_reward"),
                    k, statistics.fmean(at_k) if at_k else None, statistics.fmean(hat_k) if hat_k else None,
                    list(bounds) if (bounds := shown_bounds(interval)) else None, None,
                    dict(per_example))


def compare_with_base(rows: list[SweepRow]) -> None:
    """Each step's paired difference to the base model on the examples both were scored on."""
    base = next((row for row in rows if row.step is None), None)
    if base is None:
        return
    for row in rows:
        if row is base or (result := paired_comparison(base.scores, row.scores)) is None:
            continue
        row.vs_base = {"difference": result.difference, "p_value": result.p_value, "examples": result.examples,
                       "ci95": [result.low, result.high] if math.isfinite(result.low) else None,
                       "sd": result.se * math.sqrt(result.examples) if math.isfinite(result.se) else None}


def distinguishable(row: SweepRow) -> bool:
    """Better than the base at the 5% level (a paired t-test on shared examples)."""
    return bool(row.vs_base and row.vs_base["difference"] > 0 and row.vs_base["p_value"] < 0.05)


def best_index(rows: list[SweepRow]) -> int | None:
    """The row with the highest mean reward (the earliest on a tie)."""
    scored = [(row.avg_reward, -i) for i, row in enumerate(rows) if row.avg_reward is not None]
    return -max(scored)[1] if scored else None


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(values: list[float] | None) -> str:
    return "-" if not values else f"[{values[0]:.3f}, {values[1]:.3f}]"


def _vs_base(row: SweepRow) -> str:
    v = row.vs_base
    if v is None:
        return "-"
    interval = f" [{signed(v['ci95'][0])}, {signed(v['ci95'][1])}]" if v["ci95"] else ""
    return f"{signed(v['difference'])}{interval} {format_p(v['p_value'])}"


def verdict(rows: list[SweepRow], best: int | None) -> str | None:
    """The closing line: the best step when it beats the base, else that none is distinguishable."""
    if best is None:
        return None
    top = rows[best]
    where = f"runs saved in {Path(top.run_dir).parent.parent if top.run_dir else '-'}"
    if top.step is None:
        return f"No step beat the base model (mean reward {_number(top.avg_reward)}); {where}"
    if top.vs_base is None or distinguishable(top):
        better = f", better than the base: {_vs_base(top)}" if top.vs_base else ""
        return f"Best: {top.label} (mean reward {_number(top.avg_reward)}{better}); {where}"
    needed = examples_needed(top.vs_base["sd"], top.vs_base["difference"]) if top.vs_base.get("sd") else None
    more = f"; about {needed} examples would detect a difference this size" if needed else ""
    return (f"No step is distinguishable from the base: the highest mean, {top.label}, is {_vs_base(top)} against "
            f"it on {top.vs_base['examples']} examples{more}; {where}")


def print_table(rows: list[SweepRow], weights_dir: Path, stream: IO[str] | None = None) -> None:
    from rich.console import Console  # lazy: heavy
    from rich.measure import Measurement  # lazy: heavy
    from rich.table import Table  # lazy: heavy

    compare_with_base(rows)
    best = best_index(rows)
    marked = best is not None and rows[best].step is not None and (rows[best].vs_base is None or distinguishable(rows[best]))
    k = rows[0].k if rows else 1
    table = Table(title=f"Checkpoint sweep of {weights_dir}", title_justify="left")
    for name, justify in (("step", "left"), ("mean reward", "right"), ("95% CI", "right"), ("vs base", "right"),
                          ("std", "right"), (f"pass@{k}", "right"), (f"pass^{k}", "right"), ("rollouts", "right"), ("status", "left"),
                          ("", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, row in enumerate(rows):
        mark = ("<- best" if marked else "<- highest mean") if i == best else ""
        table.add_row(row.label, _number(row.avg_reward), _interval(row.ci95), _vs_base(row), _number(row.std_reward),
                      _number(row.pass_at_k), _number(row.pass_hat_k), str(row.num_rollouts), row.status, mark,
                      style="bold green" if i == best and marked else None)
    console = Console(file=stream) if stream is not None else Console()
    if not console.is_terminal:  # a pipe or a file: the table at its natural width, not folded into 80 columns
        natural = Measurement.get(console, console.options.update_width(1000), table).maximum
        console = Console(file=stream, width=max(console.width, natural))
    console.print(table)
    if line := verdict(rows, best):
        console.print(line, soft_wrap=True, highlight=False)


def print_json(rows: list[SweepRow], weights_dir: Path, stream: IO[str]) -> None:
    """One NDJSON `sweep` event after the runs' own events."""
    compare_with_base(rows)
    best = best_index(rows)
    records = [{key: value for key, value in asdict(row).items() if key != "scores"} for row in rows]
    event = {"event": "sweep", "weights_dir": str(weights_dir), "rows": records,
             "best": rows[best].label if best is not None else None,
             "best_beats_base": bool(best is not None and distinguishable(rows[best])),
             "verdict": verdict(rows, best)}
    stream.write(json.dumps(event) + "\n")
    stream.flush()
