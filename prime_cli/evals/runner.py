"""Run one evaluation: load the environment, schedule example groups, save, summarise.

The scheduler keeps at most `max_concurrent` rollouts in flight (a group of r rollouts takes r
slots). Each finished group is scored, then each rollout is appended to results.jsonl at once.
Ctrl-C stops new groups, lets in-flight ones finish and be saved, and marks the run cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import prime_cli.envs as vf
from prime_cli.envs.eval_defaults import env_eval_defaults, env_sampling_defaults
from prime_cli.results.eval_schema import Rollout, Summary
from prime_cli.results.reward_signal import reward_check
from prime_cli.results.summary import RunningStats, metadata_fields, power_record, summarize
from prime_cli.runs.log import run_log
from prime_cli.runs.status import FINISHED, RunStatus
from prime_cli.runs.wait_notices import notice_interval

from .config import (
    DEFAULT_NUM_EXAMPLES,
    DEFAULT_ROLLOUTS_PER_EXAMPLE,
    EvalConfig,
)
from .cost_meter import CostMeter, student_price
from .display import EvalDisplay
from .health import budget_stop_reason, error_budget, final_status, first_errors, run_retries
from .jobs import EvalJobs, plan_jobs
from .preflight import load_env
from .rollout_view import rollout_text, rollout_view
from .run_files import RunFiles, prepare_run_files
from .sandboxing import start_run as start_sandboxes
from .store import state_to_row

logger = logging.getLogger("prime_cli.evals")
FATAL_ERROR_TYPES = {"FatalEndpointError"}
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
    stopped: bool = False  # the run stopped itself (a group raised, the error budget): exit 1, resumable

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
    if not (config.local_model or config.local_defaults):
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


class _Cancel:
    """First Ctrl-C: drain. Second: stop now."""

    def __init__(self, display: EvalDisplay, in_flight: set[asyncio.Task]) -> None:
        self.requested = asyncio.Event()
        self.display = display
        self.in_flight = in_flight

    def __call__(self) -> None:
        if not self.requested.is_set():
            self.requested.set()
            self.display.message(
                f"cancelling: waiting for {len(self.in_flight)} in-flight group(s) to finish (Ctrl-C again to stop now)",
                "warning")
        else:
            for task in self.in_flight:
                task.cancel()


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
        from .endpoints import endpoint_specs, open_pool, secrets_of

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
        return await _run(config, env, files, jobs, pool, display, meter, notes)


async def _run(config: EvalConfig, env: vf.Environment, files: RunFiles, jobs: EvalJobs, pool: Any,
               display: EvalDisplay, meter: CostMeter, notes: list[str] | None = None) -> EvalOutcome:
    stats = RunningStats()
    for row in files.previous_rows:
        if (row["example_id"], row["rollout_idx"]) not in files.rerun_pairs:
            stats.add(row)
    meter.add_all(files.previous_rows)  # what the earlier part of a resumed run spent counts (against --max-cost too)
    new_rows: list[Rollout] = []
    in_flight: set[asyncio.Task] = set()
    cancel = _Cancel(display, in_flight)
    slots = asyncio.Semaphore(config.max_concurrent)
    sampling_args = files.sampling_args
    total = jobs.total_rollouts + stats.snapshot()["done"]
    fatal: list[str] = []
    over_budget: list[str] = []  # why the error budget stopped the run (this process's rollouts only)
    errored_here = 0  # errored rows among new_rows, counted as they come rather than rescanned per error
    running = [0]  # rollouts in flight, for the --max-cost check
    estimated = [False]
    start = time.perf_counter()
    groups_in_flight: dict[asyncio.Task, tuple[Any, int, float]] = {}  # task -> (example id, rollouts, sent)
    last_finished: list[float | None] = [None]  # when this process last finished a rollout
    quiet_since = [start]  # the last finished rollout or heartbeat

    def check_budget() -> None:
        nonlocal errored_here
        errored_here += 1
        if over_budget or not (reason := budget_stop_reason(errored_here, len(new_rows), config.max_error_rate)):
            return
        over_budget.append(f"{reason}; first errors: {first_errors(new_rows)}")
        logger.error("%s: the run stops", over_budget[0])
        display.message(f"{over_budget[0]}: stopping the run", "error")
        for task in list(in_flight):
            if task is not asyncio.current_task():
                task.cancel()  # their rollouts are not saved: --retry-errors runs them

    async def run_group(group_index: int, row: dict[str, Any], indices: list[int]) -> None:
        client, model = pool.for_group(group_index)
        states = await env.run_group(client, model, row, n=len(indices), sampling_args=sampling_args,
                                     independent_scoring=config.independent_scoring)
        for idx, state in zip(indices, states, strict=True):
            error = state.get("error") or {}
            if error.get("type") in FATAL_ERROR_TYPES:
                fatal.append(error.get("message", "endpoint error"))
                continue  # not a result: resume will run it again
            result = state_to_row(state, idx, config.state_columns)
            last_finished[0] = quiet_since[0] = time.perf_counter()
            files.write(result)
            new_rows.append(result)
            stats.add(result)
            meter.add(result)
            if config.verbose:
                show_rollout(display, result, config.env_id)
            snapshot = stats.snapshot()
            display.progress(done=snapshot["done"], total=total, stats={**snapshot, "cost_usd": meter.shown_spend})
            if result.get("error"):
                check_budget()
        if not estimated[0] and (line := meter.estimate(total, stats.snapshot()["done"])):
            estimated[0] = True
            display.message(line)

    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, cancel)
        handler_installed = True
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        handler_installed = False

    async def heartbeat() -> None:
        """While nothing finishes, say what is in flight and since when (plain output prints it)."""
        interval = heartbeat_interval()
        while True:
            await asyncio.sleep(max(0.01, quiet_since[0] + interval - time.perf_counter()))
            now = time.perf_counter()
            if not groups_in_flight:
                quiet_since[0] = now
            if now - quiet_since[0] < interval:
                continue
            quiet_since[0] = now
            groups = list(groups_in_flight.values())
            display.heartbeat(done=stats.snapshot()["done"], total=total,
                              in_flight=[(example_id, count) for example_id, count, _ in groups],
                              oldest_s=now - min(sent for *_, sent in groups),
                              idle_s=None if last_finished[0] is None else now - last_finished[0],
                              timeout=config.timeout)

    limits = limits_line(config, sampling_args)
    display.start(env_id=config.env_id, model=config.model, run_dir=str(files.run_dir) if files.run_dir else None,
                  total=total, already_done=stats.snapshot()["done"], num_examples=files.num_examples,
                  rollouts_per_example=files.rollouts_per_example, **({"limits": limits} if limits else {}))
    for note in notes or []:
        display.message(note)
    if line := meter.estimate(total, stats.snapshot()["done"]):  # a resumed run: from its finished rollouts
        estimated[0] = True
        display.message(line)
    sandboxed = await start_sandboxes(config, env, display)
    status = RunStatus.COMPLETED
    crash: BaseException | None = None
    failures: list[BaseException] = []

    def group_done(task: asyncio.Task, width: int, count: int) -> None:
        # the slots are given back here, not in the task: a task cancelled before it ever ran has no finally
        for _ in range(width):
            slots.release()
        # the first group that raises (a full disk, a bug in the environment) stops the run: it is kept here
        # rather than dropped with its task, and the other groups in flight are cancelled
        in_flight.discard(task)
        groups_in_flight.pop(task, None)
        running[0] -= count
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())  # type: ignore[arg-type]
            for other in list(in_flight):
                other.cancel()

    beating = asyncio.create_task(heartbeat())
    try:
        for group_index, (row, indices) in enumerate(jobs.groups):
            while not meter.allows(running[0], len(indices)) and in_flight:  # the finished ones decide
                await asyncio.wait(list(in_flight), return_when=asyncio.FIRST_COMPLETED)
            if not meter.allows(running[0], len(indices)) and not (cancel.requested.is_set() or fatal or failures):
                meter.stop()
                break
            width = min(len(indices), config.max_concurrent)
            for _ in range(width):
                await slots.acquire()
            if cancel.requested.is_set() or fatal or failures or over_budget:
                for _ in range(width):
                    slots.release()
                break
            task = asyncio.create_task(run_group(group_index, row, indices))
            in_flight.add(task)
            groups_in_flight[task] = (row.get("example_id"), len(indices), time.perf_counter())
            running[0] += len(indices)
            task.add_done_callback(functools.partial(group_done, width=width, count=len(indices)))
        while in_flight:
            await asyncio.gather(*list(in_flight), return_exceptions=True)
        if failures:
            crash = failures[0]
            logger.error("a group of rollouts raised; the run stops", exc_info=crash)
            status = RunStatus.FAILED
        elif fatal or over_budget:
            status = RunStatus.FAILED
        elif cancel.requested.is_set() or meter.cap_reached:
            status = RunStatus.CANCELLED
    except asyncio.CancelledError:
        status = RunStatus.CANCELLED
    except BaseException:
        status = RunStatus.FAILED
        raise
    finally:
        beating.cancel()
        if handler_installed:
            loop.remove_signal_handler(signal.SIGINT)
        sandbox: dict[str, Any] = {}
        if sandboxed:  # what Ctrl-C (or a crash) left open is closed before the files are finished
            from .sandboxing import close_all, record

            await close_all()
            sandbox = {"sandbox": record(config, env)}
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        snapshot = stats.snapshot()
        budget = error_budget(snapshot["errors"], snapshot["done"], config.max_error_rate)
        status = final_status(status, budget)
        health = {"retries": run_retries(pool, files.store.metadata.get("retries") if files.mode != "new"
                                         and files.store else None), "error_budget": budget}
        cost = meter.record()
        all_rows, summary = files.finish(new_rows, status, elapsed_ms, summarize, metadata_fields,
                                         config.pass_threshold, extra={**health, "cost": cost, **sandbox})
        if hasattr(pool, "aclose"):
            await pool.aclose()
    summary = {**summary, **health, "cost": cost, **sandbox}
    if config.power_delta is not None:
        summary["power"] = power_record(summary, config.power_delta)
    if (check := reward_check(all_rows, config.env_id, config.env_args)) is not None:
        summary["reward_check"] = check
    run_dir = str(files.run_dir) if files.run_dir else None
    # a run stopped by its error budget is finished by --retry-errors (errored and never-run rollouts alike)
    unfinished = status not in FINISHED and not over_budget
    resume = files.resume_command(config) if unfinished and run_dir else None
    if resume and meter.cap_reached:  # its own cap would stop the resumed run at once
        resume = f"{resume} {meter.resume_cap(total, stats.snapshot()['done'])}"
    retry = files.retry_command(config) if budget["errored_rollouts"] and not resume and run_dir else None
    if status == RunStatus.COMPLETED_WITH_ERRORS and not run_dir:
        display.message("save the run with -s to rerun only its errored rollouts with --retry-errors DIR", "warning")
    display.finish(status=status, summary=summary, run_dir=run_dir, resume_command=resume, retry_command=retry)
    capped = meter.stop_line(resume) if meter.cap_reached else None
    error = (fatal[0] if fatal else f"the run stopped: {type(crash).__name__}: {crash}" if crash
             else over_budget[0] if over_budget else capped)
    return EvalOutcome(status=status, summary=summary, run_dir=files.run_dir, error=error, rows=all_rows,
                       stopped=crash is not None or bool(over_budget))

