"""The output directory of a training run: what a fresh start may clear, what a resume rewinds.

Every check comes first and reads only; then the directory's lock is taken (one run per directory);
only then is anything deleted: on a fresh start exactly the entries listed (a prime run's leftovers
that trained nothing, or what --force names), on a resume the later steps of this same run. Its files
and step folders are named by `TrainingRunLayout` (prime_cli.train.plugin_api).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import (
    FolderBusy,
    FolderLock,
    JsonLinesError,
    ResumeConfigError,
    RunDirError,
    RunStatus,
    TrainingRunLayout,
    check_resume,
    entries_listing,
    fresh_start,
    fresh_start_refusal,
    read_json_lines,
    read_manifest,
    set_manifest_status,
    steps_in,
    write_jsonl_atomic,
    write_manifest,
    write_text_atomic,
)

__all__ = ["PreparedDir", "RunDirError", "check", "checkpoint_steps", "prepare", "steps_in"]


@dataclass
class PreparedDir:
    """A directory ready for the run: locked, cleared or rewound; the config the parts read."""

    lock: FolderLock
    config_path: Path  # config.json, or config.pending.json for a resume whose config changed
    notes: list[str] = field(default_factory=list)


def checkpoint_steps(output_dir: Path) -> list[int]:
    """Steps a run can resume from: a trainer checkpoint and the orchestrator's progress."""
    return TrainingRunLayout(output_dir).checkpoint_steps()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _check_fresh(layout: TrainingRunLayout, force: bool) -> tuple[list[Path], list[Path]]:
    """The entries a fresh start will delete: (those --force deletes, a start's leftovers). Refused unless
    the first are none, or forced."""
    found = fresh_start(layout)
    if found.in_the_way and not force:
        raise RunDirError(fresh_start_refusal(layout, found))
    return found.in_the_way, found.leftovers


def _check_resume(layout: TrainingRunLayout, config: Any, step: int) -> list[str]:
    """Raise RunDirError unless `step` can be resumed with `config`; the notes on allowed config changes."""
    try:
        return check_resume(layout, config, step)
    except ResumeConfigError as exc:
        raise RunDirError(str(exc)) from None


def _kept_lines(layout: TrainingRunLayout, step: int) -> dict[Path, list[dict[str, Any]]]:
    """The metrics and eval lines of steps up to `step`, by file (a torn last line is left out; any other
    bad line is a RunDirError naming file:line, raised before anything is changed)."""
    kept = {}
    for path in (layout.metrics_path, layout.evals_path):
        if path.exists():
            try:
                kept[path] = [row for row in read_json_lines(path) if row.get("step", 0) <= step]
            except JsonLinesError as exc:
                raise RunDirError(str(exc)) from None
    return kept


def _rewind(layout: TrainingRunLayout, step: int) -> None:
    """Remove this run's steps after `step` (folders, metrics and eval lines)."""
    kept = _kept_lines(layout, step)
    for sub in layout.STEP_FOLDERS:
        for later in layout.steps(sub):
            if later > step:
                shutil.rmtree(layout.step_dir(sub, later), ignore_errors=True)
    for path, rows in kept.items():
        write_jsonl_atomic(path, rows)


def _lock(layout: TrainingRunLayout) -> FolderLock:
    try:
        return FolderLock.acquire(layout)
    except FolderBusy as exc:
        raise RunDirError(str(exc)) from None


def check(config: Any, output_dir: Path, resume_step: int | None) -> None:
    """The read-only checks of prepare (a job submitted elsewhere refuses what its trainer part would)."""
    layout = TrainingRunLayout(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise RunDirError(f"{output_dir} is a file, not a folder: give -o a folder (new or a training run's)")
    if resume_step is None:
        _check_fresh(layout, force=False)
    else:
        _check_resume(layout, config, resume_step)
        _kept_lines(layout, resume_step)


def prepare(config: Any, output_dir: Path, resume_step: int | None, force: bool = False) -> PreparedDir:
    """Check the directory for a fresh start (or a resume at `resume_step`), lock it, then clear
    (or rewind) it and write the config the parts read. Raises RunDirError with nothing changed."""
    layout = TrainingRunLayout(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise RunDirError(f"{output_dir} is a file, not a folder: give -o a folder (new or a training run's)")
    if resume_step is None:
        _check_fresh(layout, force)
    else:
        _check_resume(layout, config, resume_step)
    lock = _lock(layout)
    try:  # checked again under the lock: another run may have written in between
        # env_file names, never values; the folder as an absolute path, so that the printed resume command
        # `prime train OUT/config.json --resume-step N` works from any working folder
        config_json = config.model_copy(update={"output_dir": str(output_dir)}).model_dump_json(indent=2)
        if resume_step is None:
            forced, leftovers = _check_fresh(layout, force)
            deleted = [f"--force deleted {entries_listing(forced, output_dir)}"] if forced else []
            for path in forced + leftovers:
                _remove(path)
            write_manifest(layout)
            write_text_atomic(layout.config_path, config_json)
            return PreparedDir(lock, layout.config_path, deleted)
        notes = _check_resume(layout, config, resume_step)
        _rewind(layout, resume_step)
        if read_manifest(layout) is None:  # a run written before manifests: marked as prime's now
            write_manifest(layout)
        else:  # running again (its header, when it has one: finished_at cleared)
            set_manifest_status(layout, RunStatus.RUNNING)
        layout.pending_config_path.unlink(missing_ok=True)
        if not notes:
            return PreparedDir(lock, layout.config_path)
        write_text_atomic(layout.pending_config_path, config_json)
        return PreparedDir(lock, layout.pending_config_path, notes)
    except BaseException:
        lock.release()
        raise
