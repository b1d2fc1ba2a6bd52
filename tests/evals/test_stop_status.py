"""run_status alone: each reason an eval run stops for gives the status, exit code and resumability the runner
gave it before the runner was a class (failed + an error is exit 2 unless the run stopped itself)."""

from __future__ import annotations

import pytest

from prime_cli.evals.health import error_budget
from prime_cli.evals.runner import EvalOutcome
from prime_cli.evals.stopping import Stop, StopReason, run_status
from prime_cli.runs.status import RunStatus

CLEAN = error_budget(0, 20, 0.1)


def outcome_of(stop: Stop | None, budget: dict) -> tuple[RunStatus, str | None, int, bool]:
    end = run_status(stop, budget)
    outcome = EvalOutcome(status=end.status, summary={}, run_dir=None, error=end.error, stopped=end.stopped)
    return end.status, end.error, outcome.exit_code, end.resumable


@pytest.mark.parametrize(("stop", "status", "exit_code", "resumable"), [
    (Stop(StopReason.CANCELLED), RunStatus.CANCELLED, 1, True),
    (Stop(StopReason.COST_CAP, "cost cap reached: spent $1.00 of $1.00"), RunStatus.CANCELLED, 1, True),
    (Stop(StopReason.FATAL_ENDPOINT, "401 invalid key"), RunStatus.FAILED, 2, True),
    (Stop(StopReason.GROUP_RAISED, "the run stopped: OSError: no space"), RunStatus.FAILED, 1, True),
    (Stop(StopReason.ERROR_BUDGET, "error budget exceeded: 20 of 20"), RunStatus.FAILED, 1, False),
])
def test_each_stop_reason_gives_its_status_exit_code_and_resumability(stop, status, exit_code, resumable):
    assert outcome_of(stop, CLEAN) == (status, stop.error, exit_code, resumable)


def test_an_error_budget_stop_is_not_resumable_and_every_other_reason_is():
    assert [reason for reason in StopReason if not reason.resumable] == [StopReason.ERROR_BUDGET]


def test_a_stop_gives_its_status_whatever_the_budget_says():
    over = error_budget(20, 20, 0.1)
    for reason in StopReason:
        assert run_status(Stop(reason), over).status == run_status(Stop(reason), CLEAN).status


def test_a_run_that_ran_every_group_is_completed_within_its_budget():
    assert outcome_of(None, CLEAN) == (RunStatus.COMPLETED, None, 0, False)
    assert outcome_of(None, error_budget(2, 20, 0.1)) == (RunStatus.COMPLETED, None, 0, False)


def test_a_run_that_ran_every_group_over_its_budget_or_with_every_rollout_errored_completed_with_errors():
    assert outcome_of(None, error_budget(3, 20, 0.1)) == (RunStatus.COMPLETED_WITH_ERRORS, None, 1, False)
    assert outcome_of(None, error_budget(4, 4, 1.0)) == (RunStatus.COMPLETED_WITH_ERRORS, None, 1, False)


def test_a_cancelled_run_without_an_error_line_is_exit_1_and_a_failed_one_without_one_too():
    assert outcome_of(Stop(StopReason.CANCELLED), CLEAN)[2] == 1
    assert outcome_of(Stop(StopReason.FATAL_ENDPOINT), CLEAN)[2] == 1  # exit 2 needs the line to print
