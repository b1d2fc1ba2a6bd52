"""EvalRunner keeps one stop reason, the first that comes: a later one (Ctrl-C after an endpoint's fatal
error, a second fatal row) neither replaces it nor changes the run's status; the error budget is not judged
once the run is stopping. The runner is built on stand-ins: no environment, endpoint or file."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from prime_cli.evals.health import error_budget
from prime_cli.evals.jobs import EvalJobs
from prime_cli.evals.runner import EvalRunner
from prime_cli.evals.stopping import StopReason, run_status
from prime_cli.runs.status import RunStatus


class Messages:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str | None]] = []

    def message(self, text: str, style: str | None = None) -> None:
        self.lines.append((text, style))


def runner() -> EvalRunner:
    config = SimpleNamespace(max_concurrent=2, max_error_rate=0.1)
    files = SimpleNamespace(previous_rows=[], rerun_pairs=set())
    meter = SimpleNamespace(add_all=lambda rows: None)
    return EvalRunner(config, None, files, EvalJobs(groups=[]), None, Messages(), meter)  # type: ignore[arg-type]


def test_the_first_stop_reason_wins_and_a_later_one_is_not_recorded():
    run = runner()
    assert run.stop_for(StopReason.FATAL_ENDPOINT, "401: invalid key")
    assert not run.stop_for(StopReason.FATAL_ENDPOINT, "401: invalid key")  # the next fatal row
    assert not run.stop_for(StopReason.GROUP_RAISED, "the run stopped: OSError: no space")
    assert run.stop is not None and (run.stop.reason, run.stop.error) == (StopReason.FATAL_ENDPOINT, "401: invalid key")
    assert run_status(run.stop, error_budget(0, 0, 0.1)).status == RunStatus.FAILED


def test_ctrl_c_after_another_stop_drains_then_cancels_but_keeps_the_first_reason():
    async def scenario() -> tuple[EvalRunner, asyncio.Task]:
        run = runner()
        run.stop_for(StopReason.COST_CAP)
        group = asyncio.create_task(asyncio.sleep(10))
        run.in_flight[group] = ("example", 1, 0.0)
        run.ctrl_c()
        assert not group.cancelled() and run.display.lines[-1] == (
            "cancelling: waiting for 1 in-flight group(s) to finish (Ctrl-C again to stop now)", "warning")
        run.ctrl_c()  # the second cancels what is in flight
        await asyncio.sleep(0)
        return run, group

    run, group = asyncio.run(scenario())
    assert group.cancelled()
    assert run.stop is not None and run.stop.reason is StopReason.COST_CAP


def test_the_error_budget_is_not_judged_once_the_run_is_stopping():
    run = runner()
    run.new_rows = [{"error": {"type": "ModelError", "message": "500"}}] * 40
    run.stop_for(StopReason.CANCELLED)
    for _ in range(40):
        run.count_error()
    assert run.errored_here == 40 and run.stop.reason is StopReason.CANCELLED and not run.display.lines


def test_the_error_budget_stops_a_running_run_with_its_line():
    run = runner()
    run.new_rows = [{"error": {"type": "ModelError", "message": "500"}}] * 20
    for _ in range(20):  # 20 rollouts finished, counted as errored one by one: 5 of 20 is clearly over 10%
        run.count_error()
    assert run.stop is not None and run.stop.reason is StopReason.ERROR_BUDGET
    assert run.stop.error.startswith("error budget exceeded: 5 of 20 rollouts errored (25.0%)")
    assert len(run.display.lines) == 1  # judged once
    assert run.display.lines[-1] == (f"{run.stop.error}: stopping the run", "error")
