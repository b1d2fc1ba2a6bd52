"""The interval code against known answers: printed t tables, a hand-computed clustered standard error and
paired test, the coverage of the 95% interval on simulated runs, and planted differences found or not."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from prime_cli.results.intervals import (
    clustered_interval,
    examples_needed,
    paired_comparison,
    t_quantile,
    t_two_sided_p,
)


@pytest.mark.parametrize(("df", "table"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (5, 2.5706),
                                           (10, 2.2281), (30, 2.0423), (120, 1.9799)])
def test_t_quantiles_match_the_printed_table(df, table):
    assert t_quantile(0.975, df) == pytest.approx(table, abs=1e-4)
    assert t_two_sided_p(t_quantile(0.975, df), df) == pytest.approx(0.05, abs=1e-8)


def test_t_p_values_at_known_points():
    assert t_two_sided_p(1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|T| >= 1) = 1/2
    assert t_two_sided_p(0.0, 7) == pytest.approx(1.0)
    assert t_two_sided_p(2.0, 2) == pytest.approx(1 - 2 / math.sqrt(6), abs=1e-12)  # df 2: |t| / sqrt(2 + t^2)


def test_the_clustered_interval_of_a_hand_computed_case():
    # examples [1, 0], [1, 1], [0, 0]: mean 0.5 over 6 rollouts; residual sums per example 0, +1, -1;
    # se = sqrt((0 + 1 + 1) * 3/2) / 6 = sqrt(3) / 6; t(0.975, 2 df) = 4.302653
    interval = clustered_interval({"a": [1, 0], "b": [1, 1], "c": [0, 0]})
    assert interval.mean == pytest.approx(0.5) and (interval.clusters, interval.n) == (3, 6)
    assert interval.se == pytest.approx(math.sqrt(3) / 6)
    assert interval.low == pytest.approx(0.5 - 4.302653 * math.sqrt(3) / 6, abs=1e-6)
    assert "clustered by example, 3 examples" in interval.label()


def test_one_rollout_per_example_is_the_plain_standard_error():
    values = [0.1, 0.4, 0.35, 0.8, 0.5]
    interval = clustered_interval({i: [v] for i, v in enumerate(values)})
    assert interval.se == pytest.approx(statistics.stdev(values) / math.sqrt(5))
    assert "5 rollouts" in interval.label()


def test_clustering_widens_the_interval_when_rollouts_of_an_example_agree():
    # every example answered the same way 4 times: 10 independent facts, not 40
    by_example = {i: [float(i % 2)] * 4 for i in range(10)}
    naive_se = statistics.stdev([v for vs in by_example.values() for v in vs]) / math.sqrt(40)
    assert clustered_interval(by_example).se > 1.8 * naive_se


def test_the_95_percent_interval_covers_the_true_mean_95_percent_of_the_time():
    """400 simulated runs of 40 examples x 4 rollouts: each example's pass rate drawn from Beta(2, 3) (true
    mean 0.4), rollouts pass with that rate. Coverage of the true mean must be 93-97%."""
    covered = 0
    for seed in range(400):
        rng = random.Random(seed)
        by_example = {}
        for example in range(40):
            rate = rng.betavariate(2, 3)
            by_example[example] = [float(rng.random() < rate) for _ in range(4)]
        interval = clustered_interval(by_example)
        covered += interval.low <= 0.4 <= interval.high
    assert 0.93 <= covered / 400 <= 0.97, covered / 400


def test_the_paired_test_of_a_hand_computed_case():
    a = {1: [0.2], 2: [0.4], 3: [0.6], 4: [0.8]}
    b = {1: [0.3], 2: [0.6], 3: [0.6], 4: [1.0], 5: [1.0]}  # example 5 is not paired
    result = paired_comparison(a, b)
    # differences 0.1, 0.2, 0.0, 0.2: mean 0.125, sd sqrt(0.0275 / 3), t = 0.125 / (sd / 2) = 2.6112 on 3 df
    sd = math.sqrt(0.0275 / 3)
    assert result.difference == pytest.approx(0.125) and result.se == pytest.approx(sd / 2)
    assert (result.examples, result.better, result.worse, result.unchanged) == (4, 3, 0, 1)
    assert result.p_value == pytest.approx(0.0796, abs=5e-4)
    assert result.verdict().startswith("no detectable difference: +0.125")


def _pair(seed: int, shift: float) -> tuple[dict, dict]:
    rng = random.Random(seed)
    a, b = {}, {}
    for example in range(60):
        base = rng.random() * 0.8
        a[example] = [min(1.0, max(0.0, base + rng.gauss(0, 0.1))) for _ in range(3)]
        b[example] = [min(1.0, max(0.0, base + shift + rng.gauss(0, 0.1))) for _ in range(3)]
    return a, b


def test_a_planted_difference_is_found_and_none_is_not_invented():
    found = paired_comparison(*_pair(1, 0.1))
    assert found.p_value < 0.001 and found.low > 0 and found.verdict().startswith("B is better: +0.") and "p < 0.001" in found.verdict()
    nothing = [paired_comparison(*_pair(seed, 0.0)) for seed in range(400)]
    false_alarms = sum(r.p_value < 0.05 for r in nothing) / len(nothing)
    assert 0.02 <= false_alarms <= 0.08, false_alarms  # 5% expected at the 5% level
    assert all(r.low <= 0 <= r.high for r in nothing if r.p_value >= 0.05)


def test_examples_needed_follows_the_normal_approximation():
    # (1.96 + 0.8416)^2 * (0.3 / 0.1)^2 = 70.6 -> 71
    assert examples_needed(0.3, 0.1) == 71
    assert examples_needed(0.3, -0.1) == 71
    assert examples_needed(0.3, 0.0) is None


def test_no_examples_in_common_and_no_values_give_none():
    assert paired_comparison({1: [1.0]}, {2: [1.0]}) is None
    assert clustered_interval({}) is None


def test_the_float_standard_error_of_the_paired_test_matches_statistics_exact_one():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(2, 60)
        a = {i: [rng.choice([0.0, 0.5, 1.0])] for i in range(n)}
        b = {i: [rng.choice([0.0, 1.0]), rng.random()] for i in range(n)}
        diffs = [statistics.fmean(b[i]) - statistics.fmean(a[i]) for i in range(n)]
        result = paired_comparison(a, b)
        assert math.isclose(result.se, statistics.stdev(diffs) / math.sqrt(n), rel_tol=1e-12, abs_tol=1e-15)
