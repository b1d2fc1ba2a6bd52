"""`prime eval rescore RUN`: the environment's rubric, as it is now, re-run on a saved run's completions.

No policy model is called. Each example's rollouts are scored together, as `prime eval run` scores a
group (one by one when the run used independent scoring). The new run folder is created beside the
source (or under `-o`), its metadata names the source (`rescored_from`), and rows are appended as each
group is scored, so an interrupted rescore keeps what it did and `--resume NEW_RUN` does the rest. Another
tool's run (verifiers' folders, read through foreign_runs) is rescored into `prime eval run`'s default
folder for its environment and model (or `-o`), never into the other tool's folder.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import prime_cli
import prime_cli.envs as vf
from prime_cli.envs.errors import UserInputError
from prime_cli.records.eval_rows import read_results
from prime_cli.records.eval_run import EvalRunLayout, MetadataRecord, Rollout
from prime_cli.results.eval_run import EvalRun, load_run
from prime_cli.results.row_values import example_key
from prime_cli.results.run_folders import check_eval_output_dir
from prime_cli.results.summary import metadata_fields, summarize
from prime_cli.runs.metadata import RunDirError, read_metadata
from prime_cli.runs.status import RunStatus
from prime_cli.runs.tasks import gather_or_cancel

from .cost_meter import judge_cost
from .rescore_states import RebuiltState, rescored_row, state_from_row
from .store import RunStore

# metadata of the source that describes its results, not the run that produced them: recomputed
RESULT_KEYS = {"avg_reward", "avg_metrics", "pass_at_k", "pass_hat_k", "avg_error", "usage", "summary", "status", "date",
               "time_ms", "retries", "error_budget", "rescored_from", "reward_functions", "env_args",
               "source", "cost"}  # `source`: the converted copy of another tool's run names its folder; ours is not one


class RescoreRefused(UserInputError):
    """The rubric needs what the run did not save (one line for the user)."""


@dataclass
class RescoreOutcome:
    source: EvalRun
    run_dir: Path
    rows: list[Rollout]
    summary: dict[str, Any]
    status: RunStatus  # completed or cancelled


def _groups(rows: list[Rollout]) -> list[list[Rollout]]:
    groups: dict[Any, list[Rollout]] = {}
    for row in rows:
        groups.setdefault(example_key(row.get("example_id")), []).append(row)
    return list(groups.values())


def _pair(row: Rollout) -> tuple[Any, Any]:
    return example_key(row.get("example_id")), row.get("rollout_idx")


def _refusal(missing: set[str], run: Path) -> RescoreRefused:
    keys = ", ".join(sorted(missing))
    return RescoreRefused(f"the rubric reads state key(s) {keys} that {run} did not save, so it cannot be rescored "
                          f"faithfully; run the eval again with -C {','.join(sorted(missing))} (--state-columns) to "
                          "save them for a later rescore")


async def score_group(env: vf.Environment, rows: list[Rollout], independent: bool) -> list[RebuiltState]:
    states = [state_from_row(row) for row in rows]
    if independent:
        for state in states:
            await env.rubric.score_rollout(state)
    else:
        await env.rubric.score_group(states)
    return states


def _metadata(raw: dict[str, Any], source: EvalRun, env: vf.Environment, env_args: dict[str, Any]) -> MetadataRecord:
    meta: dict[str, Any] = {k: v for k, v in raw.items() if k not in RESULT_KEYS}
    meta.update(env_args=env_args, reward_functions=env.rubric.get_reward_func_names(),
                rescored_from={"run": str(source.source_path.resolve()), "date": datetime.now().isoformat(timespec="seconds"),
                               "prime_cli": prime_cli.__version__})
    return meta  # type: ignore[return-value]


def _check_resume(resume: Path) -> None:
    if not resume.is_dir() or not (resume / "metadata.json").is_file():
        raise RunDirError(f"--resume {resume}: not a run folder; pass the folder that an interrupted "
                          "`prime eval rescore` printed after 'Resume with:'")


def _open_resumed(resume: Path, source: EvalRun) -> RunStore:
    store = RunStore.open(resume)
    origin = (store.metadata.get("rescored_from") or {}).get("run")
    if origin != str(source.source_path.resolve()):
        store.close()
        raise RunDirError(f"--resume {resume} is not a rescore of {source.source_path} (it rescored {origin or 'nothing'}); "
                          "pass the folder that an earlier `prime eval rescore` of this run printed")
    return store


def rescore(path: str, env_args: dict[str, Any] | None, output_dir: str | None, resume: str | None,
            max_concurrent: int = 32, progress: Callable[[int, int], None] | None = None) -> RescoreOutcome:
    """Rescore the run at `path`; raises a UserInputError (one line) on bad input, before writing."""
    if resume:
        _check_resume(Path(resume))
    source = load_run(path)
    raw = read_metadata(source.path)
    foreign = source.source_path != source.path  # another tool's run, read through its converted copy
    folder = (source.path.parent if not output_dir and not foreign else
              EvalRunLayout.runs_folder(source.metadata.env_id, source.metadata.model, output_dir))
    if output_dir and not resume:
        check_eval_output_dir(Path(output_dir), folder)
    summary_then = raw.get("summary") if isinstance(raw.get("summary"), dict) else {}
    pass_threshold = float(summary_then.get("pass_threshold", 1.0))
    env_id = source.metadata.env_id
    args = dict(source.metadata.env_args) if env_args is None else env_args
    env = vf.load_environment(env_id, **args)
    groups = _groups(source.rows)
    if not groups:
        raise UserInputError(f"{source.source_path} has no rollouts to rescore")
    independent = bool(source.metadata.independent_scoring)
    stores: list[RunStore] = []

    def open_store() -> RunStore:  # once the first group passed the unsaved-state check
        store = _open_resumed(Path(resume), source) if resume else RunStore.create(folder, _metadata(raw, source, env, args))
        stores.append(store)
        return store

    status, start = RunStatus.COMPLETED, time.perf_counter()
    try:  # one event loop for the whole rescore: a judge rubric's client stays on the loop it was made on
        asyncio.run(_score_all(env, groups, independent, open_store, source.source_path, max_concurrent, progress, bool(resume)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        if not stores:
            raise KeyboardInterrupt from None  # nothing written yet
        status = RunStatus.CANCELLED
    except BaseException:
        status = RunStatus.FAILED
        raise
    finally:
        if stores:
            store = stores[0]
            rows = _final_rows(store.run_dir, source.rows)
            summary = summarize(rows, pass_threshold)
            if status == RunStatus.COMPLETED:
                store.rewrite_results(rows)
            cost = judge_cost(rows, source.metadata.endpoints_path)
            store.update_metadata(status=status, time_ms=(time.perf_counter() - start) * 1000.0,
                                  **metadata_fields(summary), cost=cost)
            summary["cost"] = cost
            store.close()
    return RescoreOutcome(source, stores[0].run_dir, rows, summary, status)


async def _score_all(env: vf.Environment, groups: list[list[Rollout]], independent: bool,
                     open_store: Callable[[], RunStore], source: Path, max_concurrent: int,
                     progress: Callable[[int, int], None] | None, resumed: bool) -> None:
    """Score the first group, refuse if it read unsaved state, then open the store and score the rest (on a
    resume, the groups the folder does not hold complete yet), appending each group's rows when scored."""
    first = await score_group(env, groups[0], independent)
    missing = set().union(*(state.missing_keys() for state in first))
    if missing:
        raise _refusal(missing, source)
    store = open_store()
    done = {_pair(row) for row in read_results(store.run_dir)} if resumed else set()
    todo = [group for group in groups if not all(_pair(row) in done for row in group)]
    slots = asyncio.Semaphore(max_concurrent)
    finished = len(groups) - len(todo)

    def write(rows: list[Rollout], states: list[RebuiltState]) -> None:
        nonlocal finished
        missing = set().union(*(state.missing_keys() for state in states))
        if missing:
            raise _refusal(missing, source)
        for row, state in zip(rows, states, strict=True):
            store.append(rescored_row(row, state))
        finished += 1
        if progress is not None:
            progress(finished, len(groups))

    async def one(rows: list[Rollout]) -> None:
        async with slots:
            write(rows, await score_group(env, rows, independent))

    if todo and todo[0] is groups[0]:  # scored above, before the folder existed
        write(groups[0], first)
        todo = todo[1:]
    await gather_or_cancel(*(one(group) for group in todo))  # a refusal stops the other groups writing


def _final_rows(run_dir: Path, source_rows: list[Rollout]) -> list[Rollout]:
    """The rescored rows in the source's order, one per (example, rollout) (a resumed group written twice
    keeps its last copy)."""
    latest = {_pair(row): row for row in read_results(run_dir)}
    return [latest[_pair(row)] for row in source_rows if _pair(row) in latest]
