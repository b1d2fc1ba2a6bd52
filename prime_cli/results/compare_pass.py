"""pass@k and pass^k in `prime eval compare`: each example's unbiased estimate (pass_k.py) on each side,
compared as B - A by the paired t-test the reward uses, for every k both runs have (1, 2, 4, ...).

Both sides are judged at A's pass threshold (a warning says when B's summary used another one); errored
rollouts are left out as in the summary, so an example's n is its rollouts without an error.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from prime_cli.results.intervals import PairedComparison, format_p, paired_comparison, signed

from .eval_run import EvalRun
from .pass_k import ESTIMATORS, ks, passes_by_example, per_example
from .summary import is_scored


def pass_threshold(run: EvalRun) -> float:
    value = (run.metadata.summary or {}).get("pass_threshold")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 1.0


def _passes(run: EvalRun, threshold: float) -> dict[Hashable, list[bool]]:
    return passes_by_example([row for row in run.rows if is_scored(row)], threshold)


def _shared_ks(a: Mapping[Hashable, Sequence[bool]], b: Mapping[Hashable, Sequence[bool]]) -> list[int]:
    shared = [key for key in a if key in b]
    return ks({key: a[key] if len(a[key]) <= len(b[key]) else b[key] for key in shared})


def compare_pass(a: EvalRun, b: EvalRun) -> tuple[dict[str, dict[str, PairedComparison]], list[str]]:
    """({"pass_at_k": {"1": comparison, ...}, "pass_hat_k": {...}}, warnings)."""
    threshold = pass_threshold(a)
    warnings = []
    if pass_threshold(b) != threshold:
        warnings.append(f"the runs were summarised at different pass thresholds ({threshold:g} vs "
                        f"{pass_threshold(b):g}); pass@k and pass^k compare both at A's, {threshold:g}")
    passes_a, passes_b = _passes(a, threshold), _passes(b, threshold)
    out: dict[str, dict[str, PairedComparison]] = {}
    for key, estimator in ESTIMATORS.items():
        by_k = {}
        for k in _shared_ks(passes_a, passes_b):
            side_a = {e: [v] for e, v in per_example(passes_a, k, estimator).items()}
            side_b = {e: [v] for e, v in per_example(passes_b, k, estimator).items()}
            if (result := paired_comparison(side_a, side_b)) is not None:
                by_k[str(k)] = result
        out[key] = by_k
    return out, warnings


def _short(result: PairedComparison) -> str:
    interval = f" [{signed(result.low)}, {signed(result.high)}]" if math.isfinite(result.low) else ""
    return f"{signed(result.difference)}{interval}, {format_p(result.p_value)}"


def pass_lines(comparisons: Mapping[str, Mapping[str, PairedComparison]]) -> list[str]:
    """One line per k: `pass@2: +0.250 [...], p = ...; pass^2: +0.100 [...], p = ...` (k = 1: one number,
    pass@1 = pass^1 = the pass rate)."""
    at, hat = comparisons.get("pass_at_k") or {}, comparisons.get("pass_hat_k") or {}
    lines = []
    for k, result in at.items():
        if k == "1":
            lines.append(f"pass@1 (= pass^1): {_short(result)}")
        else:
            other = f"; pass^{k}: {_short(hat[k])}" if k in hat else ""
            lines.append(f"pass@{k}: {_short(result)}{other}")
    return lines


def pass_json(comparisons: Mapping[str, Mapping[str, PairedComparison]],
              paired_json: Any) -> dict[str, dict[str, Any]]:
    return {key: {k: paired_json(result) for k, result in by_k.items()} for key, by_k in comparisons.items()}
