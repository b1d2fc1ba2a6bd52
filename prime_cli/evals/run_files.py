"""Where a run's rows go: a new run directory, a resumed one, a --retry-errors one, or memory only."""

from __future__ import annotations

import platform
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import prime_cli
import prime_cli.envs as vf
from prime_cli.records.eval_rows import read_results
from prime_cli.records.eval_run import (
    EvalRunLayout,
    MetadataRecord,
    Rollout,
    RunMetadata,
    Summary,
)
from prime_cli.results.row_index import write_index
from prime_cli.runs.metadata import RunDirError
from prime_cli.runs.status import FINISHED, RunStatus

from .config import DEFAULT_MAX_ERROR_RATE, EvalConfig
from .store import RunStore, completed_pairs, default_base_dir, find_resumable


def _row_key(row: Rollout) -> tuple[int, Any, int]:
    example_id = row["example_id"]
    if isinstance(example_id, (int, float)):
        return (0, example_id, int(row["rollout_idx"]))
    return (1, str(example_id), int(row["rollout_idx"]))


@dataclass
class RunFiles:
    mode: str  # "new" | "resume" | "retry" | "memory"
    num_examples: int
    rollouts_per_example: int
    sampling_args: dict[str, Any]
    store: RunStore | None = None
    previous_rows: list[Rollout] = field(default_factory=list)
    done_pairs: set[tuple[Any, int]] = field(default_factory=set)
    rerun_pairs: set[tuple[Any, int]] = field(default_factory=set)

    @property
    def run_dir(self) -> Path | None:
        return self.store.run_dir if self.store else None

    @property
    def log_path(self) -> Path | None:
        return self.store.log_path if self.store else None

    def write(self, row: Rollout) -> None:
        # --retry-errors replaces rows at the end (atomically); everything else is saved at once
        if self.store is not None and self.mode != "retry":
            self.store.append(row)

    def merged_rows(self, new_rows: list[Rollout]) -> list[Rollout]:
        if self.mode != "retry":
            return self.previous_rows + new_rows
        fixed = {(r["example_id"], r["rollout_idx"]): r for r in new_rows if not r.get("error")}
        never_run = [r for r in new_rows if (r["example_id"], r["rollout_idx"]) not in self.done_pairs]
        return [fixed.get((r["example_id"], r["rollout_idx"]), r) for r in self.previous_rows] + never_run

    def finish(self, new_rows: list[Rollout], status: RunStatus, elapsed_ms: float,
               summarize: Callable[..., Summary], metadata_fields: Callable[[Summary], MetadataRecord],
               pass_threshold: float, extra: MetadataRecord | None = None) -> tuple[list[Rollout], Summary]:
        """Write the final rows and metadata (with `extra` fields, e.g. retries) and close the store.
        Returns the run's rows and their summary."""
        rows = self.merged_rows(new_rows)
        if self.store is not None and (status in FINISHED or self.mode == "retry"):
            rows = sorted(rows, key=_row_key)
        summary = summarize(rows, pass_threshold=pass_threshold)
        if self.store is not None:
            if status in FINISHED or self.mode == "retry":
                self.store.rewrite_results(rows)
            previous_ms = float(self.store.metadata.get("time_ms") or 0.0) if self.mode != "new" else 0.0
            self.store.update_metadata(status=status, time_ms=previous_ms + elapsed_ms, **metadata_fields(summary),
                                       **(extra or {}))
            self.store.close()
            write_index(self.run_dir)  # so that `prime eval tui` opens it with sort and filter at once
        return rows, summary

    def resume_command(self, config: EvalConfig) -> str:
        """`prime eval run ... -R DIR`: runs the missing rollouts, pasted from any folder."""
        return shlex.join([*command_prefix(config), "-R", str(self.run_dir.resolve())])

    def retry_command(self, config: EvalConfig) -> str:
        """`prime eval run ... --retry-errors DIR`: reruns the errored rollouts, pasted from any folder."""
        return shlex.join([*command_prefix(config), "--retry-errors", str(self.run_dir.resolve())])


def command_prefix(config: EvalConfig) -> list[str]:
    """`prime eval run ENV -m MODEL` and every flag that decides where requests go and what the
    environment is, so that a printed command works when pasted. Credential-like headers are left
    out (they would be printed in clear); the model's sampling settings come from metadata.json."""
    import json  # lazy: already loaded

    from prime_cli.clients.command_flags import model_flags  # lazy: already loaded
    from prime_cli.clients.registry import secret_header_values  # lazy: already loaded

    parts = ["prime", "eval", "run", config.env_id, *model_flags(
        config.model, config.base_url, config.api_key_var, config.endpoints_path, local=config.builtin_name or False)]
    secret = set(secret_header_values(config.headers))
    for name, value in config.headers.items():
        if value not in secret:
            parts += ["--header", f"{name}: {value}"]
    if config.env_args:
        parts += ["-a", json.dumps(config.env_args)]
    if config.extra_env_kwargs:
        parts += ["-x", json.dumps(config.extra_env_kwargs)]
    if config.sandbox:
        parts += ["--sandbox", config.sandbox]
    if config.max_error_rate != DEFAULT_MAX_ERROR_RATE:
        parts += ["--max-error-rate", str(config.max_error_rate)]
    return parts


def start_metadata(config: EvalConfig, env: vf.Environment, n: int, r: int,
                   sampling_args: dict[str, Any]) -> MetadataRecord:
    """metadata.json of a new run (status running), validated by `RunMetadata`."""
    return RunMetadata(
        env_id=config.env_id,
        env_args=config.env_args,
        model=config.model,
        base_url=_strip_userinfo(config.base_url),
        local_model=config.served_local,
        api_key_var=config.api_key_var,
        endpoints_path=config.endpoints_path,
        num_examples=n,
        rollouts_per_example=r,
        sampling_args=sampling_args,
        independent_scoring=config.independent_scoring,
        date=datetime.now().isoformat(timespec="seconds"),
        version_info={"prime_cli": prime_cli.__version__, "python": platform.python_version()},
        state_columns=list(config.state_columns),
        tools=env.oai_tools or [],
        reward_functions=env.rubric.get_reward_func_names(),
        status=RunStatus.RUNNING,
        **({"sweep": config.sweep} if config.sweep else {}),
    ).to_record()


def _strip_userinfo(url: str | None) -> str | None:
    if not url or "@" not in url.split("//", 1)[-1].split("/", 1)[0]:
        return url
    scheme, rest = url.split("//", 1) if "//" in url else ("", url)
    return f"{scheme}//{rest.split('@', 1)[1]}"


def _open_existing(run_dir: Path, config: EvalConfig, flag: str) -> RunStore:
    if not EvalRunLayout(run_dir).is_run():
        raise RunDirError(f"{flag} {run_dir}: not a run directory (no metadata.json)")
    store = RunStore.open(run_dir)
    meta = store.metadata
    if meta.get("env_id") != config.env_id or meta.get("model") != config.model:
        store.close()
        raise RunDirError(
            f"{flag} {run_dir}: that run is {meta.get('env_id')!r} with model {meta.get('model')!r}, "
            f"not {config.env_id!r} with {config.model!r}; pass the matching environment and -m"
        )
    return store


def changed_task(current: list[dict[str, Any]], saved: list[dict[str, Any]]) -> str | None:
    """How the tasks differ from the saved run's, by their `info.task_key` (verifiers v1 tasksets record one on
    each row), or None: a resumed run must give each example the task it had."""
    keys = {row["example_id"]: (row.get("info") or {}).get("task_key") for row in current}
    for row in saved:
        key = (row.get("info") or {}).get("task_key") if isinstance(row.get("info"), dict) else None
        if key is None:
            continue
        now = keys.get(row["example_id"], "missing")
        if now != key:
            was = f"task {key[:12]}"
            return (f"example {row['example_id']} was {was} in that run and is "
                    f"{'no longer there' if now == 'missing' else f'task {str(now)[:12]} now'}")
    return None


def _refuse_changed_tasks(store: RunStore, env: vf.Environment, n: int, seed: int | None, rows: list[dict[str, Any]],
                          flag: str) -> None:
    if (change := changed_task(env.get_eval_dataset(n=n, seed=seed), rows)) is not None:
        store.close()
        raise RunDirError(f"{flag} {store.run_dir}: the environment's tasks changed ({change}); resume it with the "
                          "tasks it started with, or start a new run")


def prepare_run_files(config: EvalConfig, env: vf.Environment, n: int, r: int,
                      run_dir: Path | None = None) -> RunFiles:
    """The run's files: a new run (in `run_dir` when given), a resumed one, or none (not saved)."""
    sampling_args = config.merged_sampling_args()
    if run_dir is not None:
        return RunFiles("new", n, r, sampling_args, RunStore.create_at(run_dir, start_metadata(config, env, n, r,
                                                                                              sampling_args)))
    base = default_base_dir(config.env_id, config.model, Path(config.output_dir) if config.output_dir else None)
    if config.resume:
        run_dir = find_resumable(base) if config.resume == "latest" else Path(config.resume)
        if run_dir is None:
            raise RunDirError(f"-R: no unfinished run of {config.env_id} with {config.model} under {base}")
        store = _open_existing(run_dir, config, "-R")
        rows = read_results(run_dir)
        meta = store.metadata
        _refuse_changed_tasks(store, env, int(meta["num_examples"]), config.seed, rows, "-R")
        store.update_metadata(status=RunStatus.RUNNING, sampling_args=sampling_args)
        return RunFiles("resume", int(meta["num_examples"]), int(meta["rollouts_per_example"]),
                        sampling_args, store, rows, completed_pairs(rows))
    if config.retry_errors:
        run_dir = Path(config.retry_errors)
        store = _open_existing(run_dir, config, "--retry-errors")
        rows = read_results(run_dir)
        rerun = {(row["example_id"], row["rollout_idx"]) for row in rows if row.get("error")}
        meta = store.metadata
        _refuse_changed_tasks(store, env, int(meta["num_examples"]), config.seed, rows, "--retry-errors")
        return RunFiles("retry", int(meta["num_examples"]), int(meta["rollouts_per_example"]),
                        sampling_args, store, rows, completed_pairs(rows), rerun)
    if config.save_results:
        store = RunStore.create(base, start_metadata(config, env, n, r, sampling_args))
        return RunFiles("new", n, r, sampling_args, store)
    return RunFiles("memory", n, r, sampling_args)
