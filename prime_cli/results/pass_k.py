"""pass@k and pass^k of eval rows, with their 95% intervals clustered by example.

pass@k: the chance that at least one of k rollouts of an example passes (can the model do it at all);
pass^k: the chance that all k pass (does it do it every time). Both are the unbiased estimators over the
n rollouts an example has, c of which passed: pass@k = 1 - C(n-c, k)/C(n, k), pass^k = C(c, k)/C(n, k);
averaged over examples, for k = 1, 2, 4, ... up to the fewest rollouts an example has. With k = 1 both
are the pass rate. A rollout passes when its reward reaches the pass threshold. The rows given are the
scored ones: an errored rollout is left out (an example's n is its rollouts without an error), never
counted as a fail.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from prime_cli.results.intervals import Interval, clustered_interval

from .row_values import example_key, reward_value

Estimator = Callable[[int, int, int], float]


def _check(n: int, c: int, k: int, name: str) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"{name} needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from `n` samples of which `c` passed: 1 - C(n-c, k) / C(n, k).

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms the large binomials.
    """
    _check(n, c, k, "pass_at_k")
    if n - c < k:
        return 1.0
    fail = 1.0
    for i in range(n - c + 1, n + 1):
        fail *= 1.0 - k / i
    return 1.0 - fail


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k from `n` samples of which `c` passed: C(c, k) / C(n, k), the chance that k of the
    n drawn without replacement all passed. Computed as prod_{i=0..k-1} (c-i)/(n-i)."""
    _check(n, c, k, "pass_hat_k")
    if c < k:
        return 0.0
    all_pass = 1.0
    for i in range(k):
        all_pass *= (c - i) / (n - i)
    return all_pass


ESTIMATORS: dict[str, Estimator] = {"pass_at_k": pass_at_k, "pass_hat_k": pass_hat_k}
"""Summary key -> estimator; the summary, metadata.json and its ci95 use these keys."""


def passes_by_example(rows: Iterable[Mapping[str, Any]], threshold: float) -> dict[Hashable, list[bool]]:
    """Whether each (scored) row passed, grouped by example."""
    groups: dict[Hashable, list[bool]] = defaultdict(list)
    for row in rows:
        groups[example_key(row.get("example_id"))].append(reward_value(row.get("reward")) >= threshold)
    return dict(groups)


def ks(groups: Mapping[Hashable, Sequence[bool]]) -> list[int]:
    """1, 2, 4, ... up to the fewest rollouts an example has."""
    smallest = min((len(passed) for passed in groups.values()), default=0)
    out, k = [], 1
    while k <= smallest:
        out.append(k)
        k *= 2
    return out


def per_example(groups: Mapping[Hashable, Sequence[bool]], k: int, estimator: Estimator) -> dict[Hashable, float]:
    """Each example's estimate (examples with fewer than k rollouts left out)."""
    return {key: estimator(len(passed), sum(passed), k) for key, passed in groups.items() if len(passed) >= k}


def pass_values(groups: Mapping[Hashable, Sequence[bool]], estimator: Estimator) -> dict[str, float]:
    """{"1": ..., "2": ..., ...}: the estimate averaged over examples, for each k."""
    return {str(k): statistics.fmean(per_example(groups, k, estimator).values()) for k in ks(groups)}


def pass_intervals(groups: Mapping[Hashable, Sequence[bool]], estimator: Estimator) -> dict[str, Interval | None]:
    """For each k, the 95% interval of the mean over examples (one value per example: a cluster)."""
    return {str(k): clustered_interval({key: [value] for key, value in per_example(groups, k, estimator).items()})
            for k in ks(groups)}
