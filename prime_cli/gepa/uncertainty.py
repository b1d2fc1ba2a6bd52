"""95% intervals of GEPA's scores: a candidate's validation mean over its rows, and the best prompt against
the seed on the held-out test rows, paired by row (prime_cli.results.intervals). Each row's score is one
number (the mean of its rollouts without an error), so a row is one cluster; a row whose rollouts all
errored (None) is left out, and a paired comparison uses the rows both sides were scored on."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prime_cli.results.intervals import (
    Interval,
    PairedComparison,
    clustered_interval,
    paired_comparison,
)


def _by_row(scores: Sequence[float | None]) -> dict[int, list[float]]:
    return {row: [score] for row, score in enumerate(scores) if score is not None}


def row_interval(scores: Sequence[float | None]) -> Interval | None:
    interval = clustered_interval(_by_row(scores))
    return interval if interval is not None and math.isfinite(interval.se) else None


def bracket(scores: Sequence[float | None]) -> str:
    """` [0.512, 0.688]`; nothing when there are fewer than 2 rows or every row scored the same (no width)."""
    interval = row_interval(scores)
    return "" if interval is None or interval.se == 0.0 else f" [{interval.low:.3f}, {interval.high:.3f}]"


def bounds(scores: Sequence[float | None]) -> list[float] | None:
    interval = row_interval(scores)
    return None if interval is None else [interval.low, interval.high]


def test_difference(seed_scores: Sequence[float | None] | None,
                    best_scores: Sequence[float | None] | None) -> PairedComparison | None:
    """Best minus seed on the test rows both were scored on."""
    if not seed_scores or not best_scores:
        return None
    return paired_comparison(_by_row(seed_scores), _by_row(best_scores))


def paired_record(paired: PairedComparison | None) -> dict[str, Any] | None:
    if paired is None:
        return None
    return {"difference": paired.difference, "ci95": [paired.low, paired.high] if math.isfinite(paired.low) else None,
            "p_value": paired.p_value, "rows": paired.examples, "better": paired.better, "worse": paired.worse,
            "verdict": verdict(paired)}


def verdict(paired: PairedComparison) -> str:
    """The paired verdict in GEPA's words (B is the best prompt, A the seed)."""
    return paired.verdict().replace("B is", "the best prompt is")


def intervals_record(seed_val: Sequence[float | None], best_val: Sequence[float | None],
                     seed_test: Sequence[float | None] | None, best_test: Sequence[float | None] | None) -> dict[str, Any]:
    """metadata.json `intervals`: what the final lines show, as numbers."""
    return {"level": 0.95, "validation_rows": len(best_val), "seed_val_ci95": bounds(seed_val),
            "best_val_ci95": bounds(best_val), "test_difference": paired_record(test_difference(seed_test, best_test))}
