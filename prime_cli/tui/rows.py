"""Pure row logic behind the screens: sort keys, grouping repeats, joining two runs, histograms."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prime_cli.results.intervals import PairedComparison, paired_comparison
from prime_cli.tui.filters import field_value

Row = Mapping[str, Any]


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def reward_of(row: Row) -> float:
    """A row's reward; None counts as 0.0 (for sorting; the summary and the histogram leave errored rows out)."""
    value = number(row.get("reward"))
    return 0.0 if value is None else value


def sort_keys(metric_names: list[str]) -> list[str]:
    """The columns the rollouts table can sort by, in the order `s` cycles through them."""
    return ["row", "reward", *(f"metrics.{m}" for m in metric_names), "example_id", "tokens", "time_ms", "error"]


def sort_value(row: Row, key: str) -> tuple[int, Any]:
    """A comparable key: numbers before text, missing values last."""
    value = field_value(row, key)
    if key == "error":
        return (0, 1) if value else (0, 0)
    num = number(value)
    if num is not None:
        return (0, num)
    if value is None:
        return (2, "")
    return (1, str(value))


def metric_names(rows: list[Row], limit: int = 2000) -> list[str]:
    """Metric names in first-seen order, from the first `limit` rows."""
    names: dict[str, None] = {}
    for row in rows[:limit]:
        metrics = row.get("metrics")
        if isinstance(metrics, Mapping):
            names.update((str(k), None) for k in metrics)
    return list(names)


def example_key(row: Row) -> Any:
    value = row.get("example_id")
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


@dataclass
class ExampleGroup:
    """The repeats (rollouts) of one example."""

    example_id: Any
    indices: list[int] = field(default_factory=list)
    # rewards of the rollouts that did not error (a missing reward as 0.0): an errored rollout is counted in
    # `errors`, never scored 0 (its reward is null in results.jsonl, 0.0 in runs saved before)
    rewards: list[float] = field(default_factory=list)
    scored: list[float] = field(default_factory=list)  # the same, rollouts with a numeric reward only
    errors: int = 0

    @property
    def mean(self) -> float | None:
        """Mean reward of the rollouts that did not error; None when every one errored."""
        return statistics.fmean(self.rewards) if self.rewards else None

    @property
    def scored_mean(self) -> float | None:
        """Mean over the rollouts that did not error (None when all did): what comparisons pair on."""
        return statistics.fmean(self.scored) if self.scored else None

    @property
    def spread(self) -> float:
        return max(self.rewards) - min(self.rewards) if self.rewards else 0.0


def group_examples(rows: list[Row], indices: list[int] | None = None) -> list[ExampleGroup]:
    """Groups of `rows[i]` by example_id, in first-seen order."""
    groups: dict[Any, ExampleGroup] = {}
    for i in range(len(rows)) if indices is None else indices:
        row = rows[i]
        key = example_key(row)
        group = groups.get(key)
        if group is None:
            group = groups[key] = ExampleGroup(row.get("example_id"))
        group.indices.append(i)
        if row.get("error"):
            group.errors += 1
            continue
        group.rewards.append(reward_of(row))
        if (reward := number(row.get("reward"))) is not None:
            group.scored.append(reward)
    return list(groups.values())


@dataclass
class PairedExample:
    example_id: Any
    a: ExampleGroup | None
    b: ExampleGroup | None

    @property
    def example_id_key(self) -> Any:
        return example_key({"example_id": self.example_id})

    @property
    def delta(self) -> float | None:
        if self.a is None or self.b is None or self.a.scored_mean is None or self.b.scored_mean is None:
            return None
        return self.b.scored_mean - self.a.scored_mean

    @property
    def changed(self) -> bool:
        delta = self.delta
        return delta is None or abs(delta) > 1e-9


@dataclass
class Comparison:
    pairs: list[PairedExample]

    @property
    def joined(self) -> list[PairedExample]:
        return [p for p in self.pairs if p.a is not None and p.b is not None]

    def stats(self) -> dict[str, Any]:
        deltas = [p.delta for p in self.joined if p.delta is not None]
        return {
            "joined": len(deltas),
            "only_a": sum(1 for p in self.pairs if p.b is None),
            "only_b": sum(1 for p in self.pairs if p.a is None),
            "mean_delta": statistics.fmean(deltas) if deltas else None,
            "better": sum(1 for d in deltas if d > 1e-9),
            "worse": sum(1 for d in deltas if d < -1e-9),
            "same": sum(1 for d in deltas if abs(d) <= 1e-9),
            "errored_a": sum(p.a.errors for p in self.pairs if p.a),
            "errored_b": sum(p.b.errors for p in self.pairs if p.b),
        }

    def paired(self) -> PairedComparison | None:
        """The paired test of `prime eval compare` (errored rollouts left out) on the joined examples."""
        return paired_comparison({p.example_id_key: p.a.scored for p in self.joined if p.a},
                                 {p.example_id_key: p.b.scored for p in self.joined if p.b})


def compare(rows_a: list[Row], rows_b: list[Row]) -> Comparison:
    """Join two runs on example_id; rewards are averaged over each example's rollouts."""
    groups_a = {example_key({"example_id": g.example_id}): g for g in group_examples(rows_a)}
    groups_b = {example_key({"example_id": g.example_id}): g for g in group_examples(rows_b)}
    keys = list(groups_a) + [k for k in groups_b if k not in groups_a]
    pairs = []
    for key in keys:
        a, b = groups_a.get(key), groups_b.get(key)
        pairs.append(PairedExample((a or b).example_id, a, b))
    return Comparison(pairs)


def histogram(values: list[float], bins: int = 10) -> list[tuple[float, float, int]]:
    """(low, high, count) for `bins` equal-width bins over the range of `values`."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low < 1e-12:
        return [(low, high, len(values))]
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return [(low + i * width, low + (i + 1) * width, c) for i, c in enumerate(counts)]
