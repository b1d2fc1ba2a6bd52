"""Summaries of eval result rows: averages, pass@k, errors, timing and token usage.

Plain Python (no pandas) so that summarising a run stays fast to import and to compute. A row is a
results.jsonl row (`prime_cli.records.eval_run.Rollout`). A rollout that errored is counted
(`avg_error`, `error_kinds`) and left out of every score (reward, metrics, pass@k, pass^k and their
intervals), never scored as 0.0; `avg_reward_errors_as_zero` keeps the mean with errors as 0 (verifiers'
raw mean).
A reward of None on a rollout without an error counts as 0.0.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from prime_cli.records.eval_run import MetadataRecord, Rollout, Summary
from prime_cli.results.intervals import NO_SPREAD, Interval, clustered_interval, examples_needed

from .pass_k import ESTIMATORS, pass_intervals, pass_values, passes_by_example
from .reward_signal import reward_signal
from .row_values import example_key, reward_value

METADATA_SUMMARY_KEYS = ("avg_reward", "avg_metrics", "pass_at_k", "pass_hat_k", "avg_error", "usage")
_ERROR_NAME = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*[:(]")


def _metric(value: Any) -> float | None:
    """A metric value as a float (None counts as 0.0); None for values that are not numbers."""
    if value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else 0.0
    return None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _std(values: list[float]) -> float | None:
    return statistics.pstdev(values) if values else None


def _percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default) of unsorted `values`."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def error_kind(error: Any) -> str | None:
    """The type name of a row's error: `{"type": ...}` records, or "Name: message" strings."""
    if not error:
        return None
    if isinstance(error, dict):
        return str(error.get("type") or "Error")
    match = _ERROR_NAME.match(str(error))
    return match.group(1) if match else "Error"


def _failed_funcs(row: Rollout) -> list[str]:
    """Names of the reward functions that raised for this row."""
    errors = row.get("metrics_errors") or []
    if not isinstance(errors, list):
        return []
    return [str(e.get("func") or "?") if isinstance(e, dict) else str(e) for e in errors]




def _pass_ks(rows: list[Rollout], threshold: float) -> dict[str, dict[str, float]]:
    """{"pass_at_k": {...}, "pass_hat_k": {...}} of the scored rows (pass_k.py)."""
    groups = passes_by_example(rows, threshold)
    return {key: pass_values(groups, estimator) for key, estimator in ESTIMATORS.items()}


def interval_record(interval: Interval | None) -> dict[str, Any] | None:
    if interval is None or not math.isfinite(interval.se):
        return None
    return {"mean": interval.mean, "low": interval.low, "high": interval.high, "se": interval.se,
            "examples": interval.clusters, "rollouts": interval.n, "label": interval.label()}


def _intervals(rows: list[Rollout], threshold: float) -> dict[str, Any]:
    """95% intervals of the mean reward, each metric, pass@k and pass^k, clustered by example (intervals.py)."""
    rewards: dict[Any, list[float]] = defaultdict(list)
    metrics: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        key = example_key(row.get("example_id"))
        rewards[key].append(reward_value(row.get("reward")))
        for name, value in (row.get("metrics") or {}).items():
            number = _metric(value)
            if number is not None:
                metrics[name][key].append(number)
    passes = passes_by_example(rows, threshold)
    pass_ks = {key: {k: interval_record(interval) for k, interval in pass_intervals(passes, estimator).items()}
               for key, estimator in ESTIMATORS.items()}
    return {"level": 0.95, "method": "standard error clustered by example, Student t on examples - 1 df",
            "reward": interval_record(clustered_interval(rewards)),
            "metrics": {name: interval_record(clustered_interval(by)) for name, by in metrics.items()},
            **pass_ks}


def power_record(summary: Summary, delta: float) -> dict[str, Any]:
    """Examples a run needs to detect a mean-reward difference `delta` against another run (80% power,
    two-sided 5%), from this run's spread of per-example means. The other run's per-example scores are
    assumed to vary as much and independently (sd of a difference = sqrt(2) x this sd): a paired
    comparison of runs that agree per example needs fewer; `prime eval compare --power` uses the
    observed paired spread instead."""
    reward = (summary.get("ci95") or {}).get("reward")
    needed, why = None, {"reason": "too_few_examples", "note": "fewer than 2 examples"}
    if isinstance(reward, dict) and reward.get("examples", 0) >= 2:
        sd_examples = reward["se"] * math.sqrt(reward["examples"])
        if sd_examples <= NO_SPREAD:  # the count grows with the spread: zero would claim 2 examples detect anything
            why = {"reason": "no_spread", "note": f"all {reward['examples']} examples scored the same, so this run "
                   "shows no spread across examples to size it from"}
        else:
            needed, why = examples_needed(math.sqrt(2.0) * sd_examples, delta), {}
    return {"delta": delta, "at_power": 0.8, "examples_needed": needed,
            "examples": reward.get("examples") if isinstance(reward, dict) else None, **why}


def _numbers(rows: list[Rollout], field: str, key: str) -> list[float]:
    out = []
    for row in rows:
        section = row.get(field)
        value = section.get(key) if isinstance(section, dict) else None
        if isinstance(value, (int, float)) and math.isfinite(value):
            out.append(float(value))
    return out


def is_scored(row: Rollout) -> bool:
    """A rollout that ended without an error: the rollouts every score is computed on."""
    return not error_kind(row.get("error"))


def _summarize_one(rows: list[Rollout], pass_threshold: float) -> Summary:
    n = len(rows)
    scored = [row for row in rows if is_scored(row)]
    rewards = [reward_value(row.get("reward")) for row in scored]
    per_example = Counter(example_key(row.get("example_id")) for row in rows)
    metrics: dict[str, list[float]] = defaultdict(list)
    for row in scored:
        for name, value in (row.get("metrics") or {}).items():
            number = _metric(value)
            if number is not None:
                metrics[name].append(number)
    kinds = Counter(kind for kind in (error_kind(row.get("error")) for row in rows) if kind)
    stops = Counter(str(row["stop_condition"]) if row.get("stop_condition") is not None else "none" for row in rows)
    usages = [row["token_usage"] for row in rows if isinstance(row.get("token_usage"), dict)]
    prompt_tokens = sum(int(u.get("prompt_tokens") or 0) for u in usages)
    completion_tokens = sum(int(u.get("completion_tokens") or 0) for u in usages)
    totals = _numbers(rows, "timing", "total_ms")
    return {
        "num_rollouts": n,
        "num_examples": len(per_example),
        "rollouts_per_example": max(per_example.values(), default=0),
        "num_scored": len(scored),
        "avg_reward": _mean(rewards),
        "std_reward": _std(rewards),
        "avg_reward_errors_as_zero": sum(rewards) / n if n else None,  # the errored rollouts add 0 to the sum
        "avg_metrics": {name: _mean(values) for name, values in metrics.items()},
        "std_metrics": {name: _std(values) for name, values in metrics.items()},
        "ci95": _intervals(scored, pass_threshold),
        "pass_threshold": pass_threshold,
        **_pass_ks(scored, pass_threshold),  # pass_at_k, pass_hat_k
        "stop_conditions": dict(stops),
        "avg_error": sum(kinds.values()) / n if n else 0.0,
        "error_kinds": dict(kinds),
        "metrics_errors": dict(Counter(func for row in rows for func in _failed_funcs(row))),
        "timing": {
            "avg_generation_ms": _mean(_numbers(rows, "timing", "generation_ms")),
            "avg_scoring_ms": _mean(_numbers(rows, "timing", "scoring_ms")),
            "avg_total_ms": _mean(totals),
            "p50_total_ms": _percentile(totals, 0.50),
            "p95_total_ms": _percentile(totals, 0.95),
        },
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "avg_prompt_tokens": prompt_tokens / len(usages) if usages else None,
            "avg_completion_tokens": completion_tokens / len(usages) if usages else None,
        },
        "is_truncated": sum(1 for row in rows if row.get("is_truncated")) / n if n else 0.0,
    }


def _task_name(row: Rollout) -> str:
    task = row.get("task")
    return "default" if task is None else str(task)


def summarize(rows: Iterable[Rollout], pass_threshold: float = 1.0) -> Summary:
    """Summary of result rows; `per_task` splits it by task when the rows hold more than one.

    A rollout passes (for pass@k) when its reward >= `pass_threshold`; pass@k is reported for
    k = 1, 2, 4, ... up to the smallest number of rollouts of an example, averaged over examples.
    With no rows, counts are 0 and averages None. `reward_diversity` and `difficulty` say whether the
    run is a useful RL baseline (see `prime_cli.results.reward_signal`).
    """
    rows = list(rows)
    summary = _summarize_one(rows, pass_threshold)
    summary.update(reward_signal(rows, pass_threshold))  # reward_diversity, difficulty
    by_task: dict[str, list[Rollout]] = defaultdict(list)
    for row in rows:
        by_task[_task_name(row)].append(row)
    summary["per_task"] = (
        {task: _summarize_one(task_rows, pass_threshold) for task, task_rows in sorted(by_task.items())}
        if len(by_task) > 1 else {}
    )
    return summary


def metadata_fields(summary: Summary) -> MetadataRecord:
    """The metadata.json fields of a summary: the verifiers-compatible top-level keys
    (avg_reward, avg_metrics, pass_at_k, avg_error, usage) and pass_hat_k beside pass_at_k, everything else
    under "summary"."""
    fields: dict[str, Any] = {key: summary.get(key) for key in METADATA_SUMMARY_KEYS}
    fields["summary"] = {key: value for key, value in summary.items() if key not in METADATA_SUMMARY_KEYS}
    return fields  # type: ignore[return-value]


class RunningStats:
    """Running totals for the live display: O(1) per added row. Agrees with `summarize`."""

    def __init__(self) -> None:
        self.done = 0
        self.errors = 0
        self.metrics_errors = 0
        self._reward_sum = 0.0
        self._metric_sums: dict[str, float] = {}
        self._metric_counts: dict[str, int] = {}

    def add(self, row: Rollout) -> None:
        self.done += 1
        self.metrics_errors += len(_failed_funcs(row))
        if not is_scored(row):
            self.errors += 1
            return
        self._reward_sum += reward_value(row.get("reward"))
        for name, value in (row.get("metrics") or {}).items():
            number = _metric(value)
            if number is not None:
                self._metric_sums[name] = self._metric_sums.get(name, 0.0) + number
                self._metric_counts[name] = self._metric_counts.get(name, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        scored = self.done - self.errors
        return {
            "done": self.done,
            "avg_reward": self._reward_sum / scored if scored else None,
            "avg_metrics": {name: total / self._metric_counts[name] for name, total in self._metric_sums.items()},
            "errors": self.errors,
            "metrics_errors": self.metrics_errors,
        }
