"""orchestrator.max_error_rate is judged on the run's rollouts with the eval's rule (one home:
prime_cli/results/error_budget.py, through plugin_api): from 64 rollouts on, the run stops when the lower
end of the failure rate's 95% interval is above it; a step whose every rollout failed stops it at once."""

from __future__ import annotations

from prime_cli.train.plugin_api import clearly_over_budget
from prime_lora.orchestrator.rollout_errors import MIN_JUDGED_ROLLOUTS, rate_fault


def test_the_runs_failure_rate_stops_the_run_exactly_when_the_shared_rule_says_so():
    assert MIN_JUDGED_ROLLOUTS == 64
    for before_sampled in (48, 112):
        for failed_before in range(0, before_sampled, 6):
            for failed in range(0, 16):  # a step of 16 rollouts, not all failed
                fault = rate_fault(5, failed, 16, 0, 0.1, None, (failed_before, before_sampled, 1))
                expected = clearly_over_budget(failed_before + failed, before_sampled + 16, 0.1, MIN_JUDGED_ROLLOUTS)
                assert (fault is not None) == expected, (failed_before, before_sampled, failed, fault)


def test_a_rate_stop_names_the_counts_the_rate_and_the_key():
    fault = rate_fault(4, 4, 16, 0, 0.1, None, (16, 48, 1))
    assert fault == ("20 of 64 rollouts failed in steps 1-4 (error_rate 0.31, the lower end of its 95% interval "
                     "above orchestrator.max_error_rate 0.1)")


def test_few_failures_that_luck_explains_do_not_stop_the_run():
    assert rate_fault(4, 2, 16, 0, 0.1, None, (6, 48, 1)) is None  # 8 of 64: 12.5%, within luck of 10%
