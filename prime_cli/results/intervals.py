"""Uncertainty of eval scores: 95% intervals clustered by example, paired comparisons of two runs, and the
number of examples a run needs to see a difference.

Rollouts of one example are correlated (same prompt, same answer), so the standard error of a mean reward
is clustered by example (the cluster-robust "sandwich" estimator, as in Miller 2024, "Adding Error Bars to
Evals", arXiv 2411.00640), with the C/(C-1) small-sample factor and Student's t on C-1 degrees of freedom
(C examples). With one rollout per example it is the plain standard error. Two runs on the same examples are
compared on per-example mean differences (a paired t-test). Plain Python: no numpy or scipy at import.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

LEVEL = 0.95
POWER = 0.8


@dataclass(frozen=True)
class Interval:
    mean: float
    se: float  # standard error (clustered by example when examples have several rollouts)
    low: float
    high: float
    clusters: int  # examples
    n: int  # rollouts

    def label(self) -> str:
        kind = f"clustered by example, {self.clusters} examples" if self.n > self.clusters else f"{self.n} rollouts"
        if self.se == 0.0:
            return f"{self.mean:.3f} (every example scored the same: no spread to give an interval; {kind})"
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}] (95% CI, {kind})"


@dataclass(frozen=True)
class PairedComparison:
    """B minus A on the examples both runs have (per-example mean rewards)."""

    difference: float
    se: float
    low: float
    high: float
    p_value: float
    examples: int
    better: int
    worse: int
    unchanged: int

    def verdict(self) -> str:
        numbers = (f"{signed(self.difference)} [{signed(self.low)}, {signed(self.high)}], {format_p(self.p_value)}, "
                   f"{self.examples} paired examples")
        if self.examples < 2:
            return f"not enough paired examples to tell: {numbers}"
        if self.better == self.worse == 0:
            return f"no difference: all {self.examples} paired examples scored the same in A and B"
        if self.p_value < 1 - LEVEL:
            return f"B is {'better' if self.difference > 0 else 'worse'}: {numbers}"
        return f"no detectable difference: {numbers}"


def shown_bounds(record: object) -> tuple[float, float] | None:
    """(low, high) of an interval record (summary `ci95` entries) worth showing: None when it is missing or
    has no width (every example scored the same: a [x, x] bracket would claim certainty the data do not)."""
    if not isinstance(record, dict) or not record.get("se"):
        return None
    return record["low"], record["high"]


def signed(x: float) -> str:
    """+0.123 / -0.123, with rounding noise shown as +0.000 rather than -0.000."""
    return f"{0.0 if abs(x) < 5e-4 else x:+.3f}"


def format_p(p: float) -> str:
    """`p = 0.023`, or `p < 0.001`."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _normal_quantile(p: float) -> float:
    return statistics.NormalDist().inv_cdf(p)


def rate_lower_bound(count: int, n: int, level: float = LEVEL) -> float:
    """The lower end of the Wilson score interval of the rate count/n (two-sided, `level`): the smallest
    rate the data leave plausible. Wilson, not Wald: right near 0 and 1, and never below 0."""
    if n <= 0:
        return 0.0
    z = _normal_quantile(0.5 + level / 2)
    p, z2 = count / n, z * z / n
    centre = p + z2 / 2
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n))
    return max(0.0, (centre - spread) / (1 + z2))


@functools.lru_cache(maxsize=1024)  # a GEPA search asks for the same few (p, df) thousands of times
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for df 1 and 2; above, a Cornish-Fisher expansion of the normal quantile
    refined by Newton steps on the exact distribution function (t_cdf)."""
    if df < 1:
        raise ValueError("df must be at least 1")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = _normal_quantile(p)
    terms = [z,
             (z ** 3 + z) / 4,
             (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384]
    t = sum(term / df ** power for power, term in enumerate(terms))
    for _ in range(8):
        step = (t_cdf(t, df) - p) / t_pdf(t, df)
        t -= step
        if abs(step) < 1e-12:
            break
    return t


def t_pdf(t: float, df: int) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


def t_cdf(t: float, df: int) -> float:
    tail = t_two_sided_p(t, df) / 2
    return 1.0 - tail if t >= 0 else tail


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return result


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def clustered_interval(by_example: Mapping[Hashable, Sequence[float]]) -> Interval | None:
    """Mean over every value, with its 95% interval clustered by example. None without values."""
    clusters = [list(values) for values in by_example.values() if values]
    n = sum(len(c) for c in clusters)
    if n == 0:
        return None
    mean = math.fsum(v for c in clusters for v in c) / n
    count = len(clusters)
    if count < 2:
        return Interval(mean, math.nan, math.nan, math.nan, count, n)
    if n == count:  # one value per example: the plain standard error
        se = statistics.stdev([c[0] for c in clusters]) / math.sqrt(n)
    else:
        scores = math.fsum(math.fsum(v - mean for v in c) ** 2 for c in clusters)
        se = math.sqrt(scores * count / (count - 1)) / n
    half = t_quantile(0.5 + LEVEL / 2, count - 1) * se
    return Interval(mean, se, mean - half, mean + half, count, n)


def sample_sd(values: Sequence[float], mean: float) -> float:
    """The sample standard deviation about `mean` in floats (statistics.stdev's exact fractions cost ~10x,
    and a GEPA search compares thousands of pairs)."""
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def paired_comparison(a: Mapping[Hashable, Sequence[float]], b: Mapping[Hashable, Sequence[float]],
                      tolerance: float = 1e-9) -> PairedComparison | None:
    """B - A over the examples in both (each side's mean over its rollouts of the example): a paired t-test.
    None when no example is in both."""
    shared = [key for key in a if key in b and a[key] and b[key]]
    if not shared:
        return None
    diffs = [statistics.fmean(b[k]) - statistics.fmean(a[k]) for k in shared]
    better = sum(d > tolerance for d in diffs)
    worse = sum(d < -tolerance for d in diffs)
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return PairedComparison(mean, math.nan, math.nan, math.nan, 1.0, len(diffs), better, worse,
                                len(diffs) - better - worse)
    se = sample_sd(diffs, mean) / math.sqrt(len(diffs))
    df = len(diffs) - 1
    half = t_quantile(0.5 + LEVEL / 2, df) * se
    if se == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
    else:
        p = t_two_sided_p(mean / se, df)
    return PairedComparison(mean, se, mean - half, mean + half, p, len(diffs), better, worse,
                            len(diffs) - better - worse)


NO_SPREAD = 1e-9  # a standard deviation at or below this is none (float noise): no examples count can be sized from it


def examples_needed(sd_of_differences: float, delta: float, power: float = POWER) -> int | None:
    """Paired examples needed to detect a mean difference `delta` (two-sided, 5%) at `power`, for per-example
    differences with standard deviation `sd_of_differences` (normal approximation, rounded up). None when
    delta is 0 or the spread is unknown."""
    if delta == 0 or not math.isfinite(sd_of_differences):
        return None
    z = _normal_quantile(0.5 + LEVEL / 2) + _normal_quantile(power)
    return max(2, math.ceil((z * sd_of_differences / abs(delta)) ** 2))
