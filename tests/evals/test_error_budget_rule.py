"""One stop rule for max_error_rate (prime_cli/results/error_budget.py): the eval's early stop is it with
20 rollouts as the minimum; the trainer plugin's is it with 64 (tested in plugins/prime-lora/tests)."""

from __future__ import annotations

from prime_cli.evals.health import BUDGET_MIN_ROLLOUTS, budget_stop_reason
from prime_cli.results.error_budget import clearly_over_budget


def test_the_rule_waits_for_its_minimum_and_for_clear_evidence():
    assert not clearly_over_budget(19, 19, 0.1, min_rollouts=20)  # too few to judge
    assert clearly_over_budget(20, 20, 0.1, min_rollouts=20)  # all failed
    assert not clearly_over_budget(3, 20, 0.1, min_rollouts=20)  # 15%, but could be luck
    assert clearly_over_budget(30, 200, 0.1, min_rollouts=20)  # 15% over 200: clear
    assert not clearly_over_budget(200, 200, 1.0, min_rollouts=20)  # a budget of 100% never stops
    assert not clearly_over_budget(8, 64, 0.1, min_rollouts=64)  # 12.5% of 64: luck explains it
    assert clearly_over_budget(16, 64, 0.1, min_rollouts=64)  # 25% of 64: it does not
    assert not clearly_over_budget(0, 0, 0.1, min_rollouts=0)  # nothing finished: nothing to judge


def test_the_evals_early_stop_is_the_rule_with_20_rollouts():
    assert BUDGET_MIN_ROLLOUTS == 20
    for finished in (10, 19, 20, 40, 200):
        for errored in range(0, finished + 1, max(1, finished // 20)):
            stops = budget_stop_reason(errored, finished, 0.1) is not None
            assert stops == clearly_over_budget(errored, finished, 0.1, BUDGET_MIN_ROLLOUTS), (errored, finished)
