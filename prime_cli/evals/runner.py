"""Run one evaluation: load the environment, schedule example groups, save, summarise.

The scheduler keeps at most `max_concurrent` rollouts in flight (a group of r rollouts takes r
slots). Each finished group is scored, then each rollout is appended to results.jsonl at once.
Ctrl-C stops new groups, lets in-flight ones finish and be saved, and marks the run cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import prime_cli.envs as vf
from prime_cli.envs.errors import is_fatal
from prime_cli.envs.eval_defaults import env_eval_defaults, env_sampling_defaults
from prime_cli.records.eval_run import Rollout, Summary
from prime_cli.results.reward_signal import reward_check
from prime_cli.results.summary import RunningStats, metadata_fields, power_record, summarize
from prime_cli.runs.interrupt import CtrlC
from prime_cli.runs.log import run_log
from prime_cli.runs.status import RunStatus
from prime_cli.runs.wait_notices import notice_interval

from .config import (
    DEFAULT_NUM_EXAMPLES,
    DEFAULT_ROLLOUTS_PER_EXAMPLE,
    EvalConfig,
)
from .cost_meter import CostMeter, student_price
from .display import EvalDisplay
from .health import budget_stop_reason, error_budget, first_errors, run_retries
from .jobs import EvalJobs, plan_jobs
from .preflight import load_env
from .rollout_view import rollout_text, rollout_view
from .run_files import RunFiles, prepare_run_files
from .sandboxing import start_run as start_sandboxes
from .stopping import RunEnd, Stop, StopReason, run_status
from .store import state_to_row

logger = logging.getLogger("prime_cli.evals")
# While nothing finishes, plain output says what is in flight at least this often (seconds). The variable
# is for tests, which cannot wait that long.
HEARTBEAT_SECONDS = 25.0
HEARTBEAT_ENV = "PRIME_EVAL_HEARTBEAT_SECONDS"


def heartbeat_interval() -> float:
    return notice_interval(HEARTBEAT_ENV, HEARTBEAT_SECONDS)


@dataclass
class EvalOutcome:
    status: RunStatus
    summary: Summary
    run_dir: Path | None
    error: str | None = None
    rows: list[Rollout] = field(default_factory=list)
    # the run stopped itself: exit 1, not 2. After a group raised, -R finishes it; after the error budget, only
    # --retry-errors does (-R would run the never-run rollouts and keep the errored ones)
    stopped: bool = False

    @property
    def exit_code(self) -> int:
        if self.status == RunStatus.COMPLETED:
            return 0
        return 2 if self.error and self.status == RunStatus.FAILED and not self.stopped else 1


def resolve_counts(config: EvalConfig) -> tuple[int, int]:
    defaults = env_eval_defaults(config.env_id)
    n = config.num_examples if config.num_examples is not None else defaults.get("num_examples", DEFAULT_NUM_EXAMPLES)
    r = config.rollouts_per_example if config.rollouts_per_example is not None else defaults.get(
        "rollouts_per_example", DEFAULT_ROLLOUTS_PER_EXAMPLE)
    return int(n), int(r)


def limits_line(config: EvalConfig, sampling_args: dict[str, Any]) -> str | None:
    """The header line of a run on the embedded model: its reply cap and per-call timeout, and which of them
    are the `-m local` defaults (None for other models)."""
    if not (config.served_local or config.local_defaults):
        return None
    defaults = config.local_defaults
    cap = sampling_args.get("max_tokens", sampling_args.get("max_completion_tokens"))
    tokens = f"max_tokens {cap} per reply" if cap is not None else "no max_tokens"
    if "max_tokens" in defaults:
        tokens += " (the -m local default; -t N changes it)"
    timeout = f"timeout {config.timeout:g}s per model call"
    if "timeout" in defaults:
        timeout += " (the -m local default; --timeout S changes it)"
    return f"Model calls: {tokens}, {timeout}"


def with_env_sampling_defaults(config: EvalConfig) -> EvalConfig:
    """The environment's `max_tokens` / `temperature` defaults where the user gave none."""
    update = env_sampling_defaults(config.env_id, config.merged_sampling_args())
    return config.model_copy(update=update) if update else config


def show_rollout(display: EvalDisplay, row: Rollout, env_id: str) -> None:
    """`-v`: the finished rollout on the display, and in eval.log at debug level."""
    logger.debug("rollout finished: %s", rollout_text(rollout_view(row, env_id)))
    display.rollout(row)


async def run_eval(config: EvalConfig, display: EvalDisplay, *, pool: Any = None,
                   env: vf.Environment | None = None, run_dir: Path | None = None) -> EvalOutcome:
    """Run the evaluation described by `config` (checked by `preflight`, which also loads `env`);
    `run_dir` saves it in exactly that new folder (a training run's online eval)."""
    env = env if env is not None else load_env(config)
    config = with_env_sampling_defaults(config)
    num_examples, rollouts = resolve_counts(config)
    secrets: list[str] = []
    specs = None
    if pool is None:  # endpoints are checked before any file is written
        from .endpoints import endpoint_specs, open_pool, secrets_of  # lazy: already loaded

        specs = endpoint_specs(config)
        secrets = secrets_of(specs)
        pool = open_pool(config, specs)
    meter = CostMeter(config, student_price(config, specs))
    notes = []
    if not (config.resume or config.retry_errors):  # a new run records what runs, not what was asked
        available = len(env.get_eval_dataset(n=num_examples, seed=config.seed))
        if 0 < available < num_examples:
            notes.append(f"{config.env_id} has only {available} examples (asked for {num_examples}): "
                         f"evaluating all {available}")
        num_examples = available or num_examples
    files = prepare_run_files(config, env, num_examples, rollouts, run_dir)
    jobs: EvalJobs = plan_jobs(env, files.num_examples, files.rollouts_per_example, files.done_pairs,
                               files.rerun_pairs if files.mode == "retry" else None, seed=config.seed)
    with run_log(files.log_path, secrets, config.verbose):
        logger.info("eval %s with %s: %d examples x %d rollouts, %d to run", config.env_id, config.model,
                    files.num_examples, files.rollouts_per_example, jobs.total_rollouts)
        return await EvalRunner(config, env, files, jobs, pool, display, meter, notes).run()


class EvalRunner:
    """One run: groups of rollouts started under `max_concurrent` slots (and --max-cost), each finished
    rollout saved at once, and at most one stop reason, the first that comes (stopping.py says what each
    gives). One instance per run."""

    def __init__(self, config: EvalConfig, env: vf.Environment, files: RunFiles, jobs: EvalJobs, pool: Any,
                 display: EvalDisplay, meter: CostMeter, notes: list[str] | None = None) -> None:
        self.config, self.env, self.files, self.jobs = config, env, files, jobs
        self.pool, self.display, self.meter, self.notes = pool, display, meter, notes or []
        self.stats = RunningStats()
        for row in files.previous_rows:
            if (row["example_id"], row["rollout_idx"]) not in files.rerun_pairs:
                self.stats.add(row)
        meter.add_all(files.previous_rows)  # what the earlier part of a resumed run spent counts (against --max-cost too)
        self.total = jobs.total_rollouts + self.stats.snapshot()["done"]
        self.new_rows: list[Rollout] = []
        self.errored_here = 0  # errored rows among new_rows, counted as they come rather than rescanned per error
        self.in_flight: dict[asyncio.Task, tuple[Any, int, float]] = {}  # group task -> (example id, rollouts, sent)
        self.running = 0  # rollouts in flight, for the --max-cost check
        self.slots = asyncio.Semaphore(config.max_concurrent)
        self.estimated = False  # the cost estimate was shown
        self.start = time.perf_counter()
        self.last_finished: float | None = None  # when this process last finished a rollout
        self.quiet_since = self.start  # the last finished rollout or heartbeat
        self.ctrl_c = CtrlC(self.drain, self.cancel_groups, display.message)  # as GEPA takes it
        self.stop: Stop | None = None

    def stop_for(self, reason: StopReason, error: str | None = None) -> bool:
        """Record why the run stops when it is the first reason (True); a later one is only logged."""
        if self.stop is None:
            self.stop = Stop(reason, error)
            return True
        if reason is not self.stop.reason:
            logger.warning("%s after the run had stopped (%s): not recorded%s", reason.value,
                           self.stop.reason.value, f": {error}" if error else "")
        return False

    def cancel_groups(self) -> None:
        """Cancel the groups in flight (not the one calling): their rollouts are not saved."""
        for task in list(self.in_flight):
            if task is not asyncio.current_task():
                task.cancel()

    def drain(self) -> str:
        """The first Ctrl-C: no new group starts, those in flight finish and are saved (the next one cancels them)."""
        self.stop_for(StopReason.CANCELLED)
        return f"{len(self.in_flight)} in-flight group(s) to finish"

    def count_error(self) -> None:
        """An errored rollout was saved: stop the run when the error rate is clearly over the budget."""
        self.errored_here += 1
        if self.stop is not None or not (
                reason := budget_stop_reason(self.errored_here, len(self.new_rows), self.config.max_error_rate)):
            return
        line = f"{reason}; first errors: {first_errors(self.new_rows)}"
        self.stop_for(StopReason.ERROR_BUDGET, line)
        logger.error("%s: the run stops", line)
        self.display.message(f"{line}: stopping the run", "error")
        self.cancel_groups()  # --retry-errors runs their rollouts

    async def run_group(self, group_index: int, row: dict[str, Any], indices: list[int]) -> None:
        config, stats, meter = self.config, self.stats, self.meter
        client, model = self.pool.for_group(group_index)
        states = await self.env.run_group(client, model, row, n=len(indices), sampling_args=self.files.sampling_args,
                                          independent_scoring=config.independent_scoring)
        for idx, state in zip(indices, states, strict=True):
            error = state.get("error") or {}
            if is_fatal(error):
                self.stop_for(StopReason.FATAL_ENDPOINT, error.get("message", "endpoint error"))
                continue  # not a result: resume will run it again
            result = state_to_row(state, idx, config.state_columns)
            self.last_finished = self.quiet_since = time.perf_counter()
            self.files.write(result)
            self.new_rows.append(result)
            stats.add(result)
            meter.add(result)
            if config.verbose:
                show_rollout(self.display, result, config.env_id)
            snapshot = stats.snapshot()
            self.display.progress(done=snapshot["done"], total=self.total,
                                  stats={**snapshot, "cost_usd": meter.shown_spend})
            if result.get("error"):
                self.count_error()
        self.show_estimate()

    def show_estimate(self) -> None:
        """The run's cost estimate, once, as soon as there is an average to make it from."""
        if not self.estimated and (line := self.meter.estimate(self.total, self.stats.snapshot()["done"])):
            self.estimated = True
            self.display.message(line)

    def group_done(self, task: asyncio.Task, width: int, count: int) -> None:
        # the slots are given back here, not in the task: a task cancelled before it ever ran has no finally
        for _ in range(width):
            self.slots.release()
        self.in_flight.pop(task, None)
        self.running -= count
        # the first group that raises (a full disk, a bug in the environment) stops the run: its error is kept
        # here rather than dropped with its task, and the other groups in flight are cancelled
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("a group of rollouts raised; the run stops", exc_info=exc)
            if self.stop_for(StopReason.GROUP_RAISED, f"the run stopped: {type(exc).__name__}: {exc}"):
                self.cancel_groups()

    async def heartbeat(self) -> None:
        """While nothing finishes, say what is in flight and since when (plain output prints it)."""
        interval = heartbeat_interval()
        while True:
            await asyncio.sleep(max(0.01, self.quiet_since + interval - time.perf_counter()))
            now = time.perf_counter()
            if not self.in_flight:
                self.quiet_since = now
            if now - self.quiet_since < interval:
                continue
            self.quiet_since = now
            groups = list(self.in_flight.values())
            self.display.heartbeat(done=self.stats.snapshot()["done"], total=self.total,
                                   in_flight=[(example_id, count) for example_id, count, _ in groups],
                                   oldest_s=now - min(sent for *_, sent in groups),
                                   idle_s=None if self.last_finished is None else now - self.last_finished,
                                   timeout=self.config.timeout)

    async def start_groups(self) -> None:
        """Start every group that the slots, the cost cap and the stop reason let start; wait for them all."""
        meter = self.meter
        for group_index, (row, indices) in enumerate(self.jobs.groups):
            while not meter.allows(self.running, len(indices)) and self.in_flight:  # the finished ones decide
                await asyncio.wait(list(self.in_flight), return_when=asyncio.FIRST_COMPLETED)
            if self.stop is None and not meter.allows(self.running, len(indices)):
                meter.stop()
                self.stop_for(StopReason.COST_CAP)
                break
            width = min(len(indices), self.config.max_concurrent)
            for _ in range(width):
                await self.slots.acquire()
            if self.stop is not None:
                for _ in range(width):
                    self.slots.release()
                break
            task = asyncio.create_task(self.run_group(group_index, row, indices))
            self.in_flight[task] = (row.get("example_id"), len(indices), time.perf_counter())
            self.running += len(indices)
            task.add_done_callback(functools.partial(self.group_done, width=width, count=len(indices)))
        while self.in_flight:
            await asyncio.gather(*list(self.in_flight), return_exceptions=True)

    def show_start(self) -> None:
        files, done = self.files, self.stats.snapshot()["done"]
        limits = limits_line(self.config, files.sampling_args)
        self.display.start(env_id=self.config.env_id, model=self.config.model,
                           run_dir=str(files.run_dir) if files.run_dir else None, total=self.total,
                           already_done=done, num_examples=files.num_examples,
                           rollouts_per_example=files.rollouts_per_example, **({"limits": limits} if limits else {}))
        for note in self.notes:
            self.display.message(note)
        self.show_estimate()  # a resumed run: from its finished rollouts

    async def run(self) -> EvalOutcome:
        self.ctrl_c.install()
        self.show_start()
        sandboxed = await start_sandboxes(self.config, self.env, self.display)
        beating = asyncio.create_task(self.heartbeat())
        raised = False
        try:
            await self.start_groups()
        except asyncio.CancelledError:
            self.stop_for(StopReason.CANCELLED)
        except BaseException:
            raised = True
            raise
        finally:
            beating.cancel()
            self.ctrl_c.remove()
            end, all_rows, summary = await self.save(sandboxed, raised)
        return self.report(end, all_rows, summary)

    async def save(self, sandboxed: bool, raised: bool) -> tuple[RunEnd, list[Rollout], Summary]:
        """Close what the run opened and finish its files, also when the runner raised (status failed)."""
        config, files = self.config, self.files
        sandbox: dict[str, Any] = {}
        if sandboxed:  # what Ctrl-C (or a crash) left open is closed before the files are finished
            from .sandboxing import close_all, record  # lazy: already loaded

            await close_all()
            sandbox = {"sandbox": record(config, self.env)}
        elapsed_ms = (time.perf_counter() - self.start) * 1000.0
        snapshot = self.stats.snapshot()
        budget = error_budget(snapshot["errors"], snapshot["done"], config.max_error_rate)
        end = run_status(self.stop, budget)
        health = {"retries": run_retries(self.pool, files.store.metadata.get("retries") if files.mode != "new"
                                         and files.store else None), "error_budget": budget}
        cost = self.meter.record()
        all_rows, summary = files.finish(self.new_rows, RunStatus.FAILED if raised else end.status, elapsed_ms,
                                         summarize, metadata_fields, config.pass_threshold,
                                         extra={**health, "cost": cost, **sandbox})
        if hasattr(self.pool, "aclose"):
            await self.pool.aclose()
        return end, all_rows, {**summary, **health, "cost": cost, **sandbox}

    def report(self, end: RunEnd, all_rows: list[Rollout], summary: Summary) -> EvalOutcome:
        """Show the end of the run (its summary, the command that finishes it) and return its outcome."""
        config, files, meter = self.config, self.files, self.meter
        if config.power_delta is not None:
            summary["power"] = power_record(summary, config.power_delta)
        if (check := reward_check(all_rows, config.env_id, config.env_args)) is not None:
            summary["reward_check"] = check
        run_dir = str(files.run_dir) if files.run_dir else None
        capped = self.stop is not None and self.stop.reason is StopReason.COST_CAP
        resume = files.resume_command(config) if end.resumable and run_dir else None
        if resume and capped:  # its own cap would stop the resumed run at once
            resume = f"{resume} {meter.resume_cap(self.total, self.stats.snapshot()['done'])}"
        retry = (files.retry_command(config) if summary["error_budget"]["errored_rollouts"] and not resume
                 and run_dir else None)
        if end.status == RunStatus.COMPLETED_WITH_ERRORS and not run_dir:
            self.display.message("save the run with -s to rerun only its errored rollouts with --retry-errors DIR",
                                 "warning")
        self.display.finish(status=end.status, summary=summary, run_dir=run_dir, resume_command=resume,
                            retry_command=retry)
        error = meter.stop_line(resume) if capped else end.error  # the cap's line names the command to resume
        return EvalOutcome(status=end.status, summary=summary, run_dir=files.run_dir, error=error, rows=all_rows,
                           stopped=end.stopped)
