"""The error budget's stop rule, one for every engine: when a run's error rate is clearly over `max_error_rate`.

`max_error_rate` is the fraction of errored rollouts a run accepts (`prime eval run --max-error-rate`,
`orchestrator.max_error_rate` in training). A run stops early only on clear evidence: at least
`min_rollouts` finished and the lower end of the error rate's 95% (Wilson) interval above the budget. So
luck does not stop a run (3 of 20 errored against 10%), and a broken endpoint does, after `min_rollouts`
(an eval judges from 20, a training run from 64: its steps are larger). What a finished eval run is called
(completed_with_errors) compares the plain rate: there is nothing left to wait for.
"""

from __future__ import annotations

from prime_cli.results.intervals import rate_lower_bound


def clearly_over_budget(errored: int, rollouts: int, max_error_rate: float, min_rollouts: int) -> bool:
    return rollouts >= max(1, min_rollouts) and rate_lower_bound(errored, rollouts) > max_error_rate
