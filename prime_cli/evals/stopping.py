"""Why an eval run stopped before its last group, and the status and error line that gives it.

A run stops for at most one reason: the first that comes. Later ones (an endpoint error in a group still
draining after Ctrl-C) are logged, never recorded. `run_status` is the one rule from that reason and the
run's error budget to its status; `EvalOutcome.exit_code` turns status, error and `stopped` into the exit
code:

  reason          status     exit  what finishes it
  (none)          completed  0     nothing (completed_with_errors, exit 1, when the budget was exceeded)
  cancelled       cancelled  1     -R
  cost cap        cancelled  1     -R with a higher --max-cost
  fatal endpoint  failed     2     -R once the endpoint is fixed
  group raised    failed     1     -R
  error budget    failed     1     --retry-errors (its errored rollouts are kept: -R would skip them)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from prime_cli.runs.status import RunStatus

from .health import final_status


class StopReason(Enum):
    CANCELLED = "cancelled"  # Ctrl-C (the groups in flight are drained), or the run's own task was cancelled
    COST_CAP = "cost cap"  # --max-cost: the next group would not fit
    FATAL_ENDPOINT = "fatal endpoint"  # an endpoint error no retry fixes (a bad key, an unknown model)
    GROUP_RAISED = "group raised"  # a group's task raised (a full disk, a bug in the environment)
    ERROR_BUDGET = "error budget"  # the error rate clearly over --max-error-rate

    @property
    def resumable(self) -> bool:
        """Whether `-R` finishes the run: an error-budget stop kept its errored rollouts, which only
        `--retry-errors` runs again."""
        return self is not StopReason.ERROR_BUDGET


STATUS_OF_STOP = {
    StopReason.CANCELLED: RunStatus.CANCELLED,
    StopReason.COST_CAP: RunStatus.CANCELLED,
    StopReason.FATAL_ENDPOINT: RunStatus.FAILED,
    StopReason.GROUP_RAISED: RunStatus.FAILED,
    StopReason.ERROR_BUDGET: RunStatus.FAILED,
}
# the run stopped itself (exit 1 though failed); a failed run with an error and not this is exit 2
STOPPED_ITSELF = frozenset({StopReason.GROUP_RAISED, StopReason.ERROR_BUDGET})


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    error: str | None = None  # the one error line the CLI prints


@dataclass(frozen=True)
class RunEnd:
    status: RunStatus
    error: str | None
    stopped: bool  # the run stopped itself (a group raised, the error budget): exit 1, not 2
    resumable: bool  # `-R` finishes it


def run_status(stop: Stop | None, budget: dict[str, Any]) -> RunEnd:
    """The end of a run that stopped for `stop` (None: every group ran) with the error budget `budget`
    (health.error_budget's record)."""
    if stop is None:
        return RunEnd(final_status(RunStatus.COMPLETED, budget), None, stopped=False, resumable=False)
    return RunEnd(STATUS_OF_STOP[stop.reason], stop.error, stopped=stop.reason in STOPPED_ITSELF,
                  resumable=stop.reason.resumable)
