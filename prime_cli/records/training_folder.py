"""Who owns a training run's output directory, and who is using it.

A run marks its directory with a manifest (prime-train.json, written before anything else) that starts
with the run's versioned header (records/header.py: kind "training", run id, status, created/finished,
error) and names the entries it owns (`TrainingRunLayout.OWNED`). The launcher keeps the header's status
true (`set_manifest_status`: running, then completed, failed or stopped); a run killed with SIGKILL leaves
"running", so a reader asks the folder's lock whether it still runs. A manifest of format version 0
(`kind: "prime train"`, epoch `created_at`, no status) is still a prime run's. A fresh start touches only those names; it
refuses a directory where any of them exists that no prime run wrote (or a run that trained), listing
them, unless told to delete exactly those.

One run per directory: train.lock is held with an OS file lock (flock) for the run's life. The kernel
drops the lock when the process ends however it ends (SIGKILL included), so a stale file blocks nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_cli.runs.atomic import write_json_atomic
from prime_cli.runs.ids import new_run_id
from prime_cli.runs.json_lines import read_json_object
from prime_cli.runs.layouts import TrainingRunLayout
from prime_cli.runs.status import RunStatus

from .header import has_header, header_update, new_header

MANIFEST_KIND_V0 = "prime train"  # the manifest's kind before it had a header
ACQUIRE_TRIES = 5


class FolderBusy(Exception):
    """Another process holds the directory's lock."""

    def __init__(self, output_dir: Path, holder: dict[str, Any]):
        self.output_dir, self.holder = output_dir, holder
        pid = holder.get("pid") or "?"  # a reader between the holder's truncate and write sees no pid
        since = holder.get("started_at")
        when = f", started {time.strftime('%H:%M:%S', time.localtime(since))}" if isinstance(since, (int, float)) else ""
        super().__init__(f"{output_dir} is in use by another prime train (PID {pid}{when}); wait for it to end, "
                         f"stop it (kill {pid}), or train elsewhere with -o DIR")


def is_manifest(data: Any) -> bool:
    """A prime training run's manifest: a header of kind "training", or one of format version 0."""
    if not isinstance(data, dict):
        return False
    return data.get("kind") == "training" if has_header(data) else data.get("kind") == MANIFEST_KIND_V0


def read_manifest(layout: TrainingRunLayout) -> dict[str, Any] | None:
    """The manifest when the directory is a prime training run's, else None."""
    data = read_json_object(layout.manifest_path)
    return data if is_manifest(data) else None


def write_manifest(layout: TrainingRunLayout, run_id: str | None = None) -> dict[str, Any]:
    """Mark the directory as a run starting now: the header's keys, then the entries it owns."""
    manifest = {**new_header("training", run_id or new_run_id()), "owns": list(TrainingRunLayout.OWNED)}
    layout.output_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(layout.manifest_path, manifest)
    return manifest


def set_manifest_status(layout: TrainingRunLayout, status: RunStatus, error: str | None = None) -> None:
    """Record how the run stands in its manifest's header (rewritten atomically): running again on a resume,
    or how it ended (completed, failed with its error's first line, stopped), with `finished_at`. A manifest
    of format version 0 (a run of an older version resumed) or none is left as it is."""
    manifest = read_manifest(layout)
    if manifest is None or not has_header(manifest):
        return
    line = error.strip().splitlines()[0] if error and error.strip() else None
    fields = {"status": str(status), "error": line}
    write_json_atomic(layout.manifest_path, {**manifest, **fields, **header_update(manifest, fields)})


@dataclass
class FolderLock:
    """The held lock of one output directory; `release()` (or process exit) frees it."""

    path: Path
    fd: int

    @classmethod
    def acquire(cls, layout: TrainingRunLayout) -> FolderLock:
        """Lock the directory (created if needed) or raise FolderBusy naming the holder."""
        layout.output_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(layout.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        for attempt in range(ACQUIRE_TRIES):  # a reader's probe (lock_holder) holds it for a moment
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == ACQUIRE_TRIES - 1:
                    os.close(fd)
                    raise FolderBusy(layout.output_dir, read_json_object(layout.lock_path)) from None
                time.sleep(0.1)
        holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started_at": time.time()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        return cls(layout.lock_path, fd)

    def release(self) -> None:
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        try:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:  # closing drops the lock even where the unlock failed
            with contextlib.suppress(OSError):
                os.close(fd)


def lock_holder(layout: TrainingRunLayout) -> dict[str, Any] | None:
    """Who holds the directory's lock now (pid, host, started_at), or None when no process does.
    Probes with a shared lock, released at once."""
    try:
        fd = os.open(layout.lock_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_json_object(layout.lock_path) or {"pid": None}
    finally:
        os.close(fd)  # closing drops a lock taken here
    return None


@dataclass
class FreshStart:
    """What a fresh start finds in its output directory."""

    in_the_way: list[Path]  # entries it would write that no untrained prime run left: refused without --force
    leftovers: list[Path]  # entries of a prime run that trained nothing (an aborted start): cleared
    trained_up_to: int | None  # the newest trained step of a run found there


def fresh_start(layout: TrainingRunLayout) -> FreshStart:
    """Read-only: which entries of the directory a fresh start would have to delete, and whose they are."""
    entries = [p for p in layout.owned_entries() if p.name != layout.LOCK]
    ours = read_manifest(layout) is not None
    trained = [s for s in layout.weight_steps() if s > 0]
    trained_up_to = max(trained) if trained else (0 if ours and layout.metrics_path.exists() else None)
    if entries and ours and trained_up_to is None:
        return FreshStart([], entries, None)
    return FreshStart(entries, [], trained_up_to)


def _saved_max_steps(layout: TrainingRunLayout) -> int:
    try:
        value = json.loads(layout.config_path.read_text(encoding="utf-8")).get("max_steps")
    except (OSError, ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) else 0


def entries_listing(paths: list[Path], root: Path) -> str:
    """`weights/, config.json (2 entries of ROOT)`: entries of a run folder as a refusal or a note names them."""
    names = [p.name + ("/" if p.is_dir() else "") for p in paths]
    return ", ".join(names) + f" ({len(names)} {'entry' if len(names) == 1 else 'entries'} of {root})"


def fresh_start_refusal(layout: TrainingRunLayout, found: FreshStart, config_path: Path | str | None = None) -> str:
    """The one line a refused fresh start prints: what is there, and the ways on."""
    where, listed = layout.output_dir, entries_listing(found.in_the_way, layout.output_dir)
    if found.trained_up_to is not None:
        steps = layout.checkpoint_steps()
        resume = ""
        if steps:
            more = ""
            if steps[-1] >= _saved_max_steps(layout):  # it finished: a resume needs more steps
                more = f" --set max_steps={steps[-1] + 10}"
            resume = f"continue it with `prime train {config_path or layout.config_path} --resume-step {steps[-1]}{more}`, "
        return (f"{where} already holds a training run (trained up to step {found.trained_up_to}); {resume}"
                f"train elsewhere with -o DIR, or add --force to delete exactly: {listed}")
    return (f"{where} holds files this run would write that no prime training run wrote: {listed}; train "
            "elsewhere with -o DIR, or add --force to delete exactly those")
