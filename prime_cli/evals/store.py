"""The eval results store: the on-disk contract every reader and writer goes through.

`<root>/outputs/evals/<env_id>--<model>/<run_id>/` holds metadata.json (status "running" at start,
rewritten atomically), results.jsonl (one row per finished rollout, appended and flushed at once)
and eval.log. Whole-file rewrites go to a temporary file that is renamed over the old one; readers
tolerate a truncated last line (a run killed mid-write). See DESIGN.md, "Eval results on disk".
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from prime_cli.envs.errors import error_record
from prime_cli.runs import json_lines
from prime_cli.runs.atomic import write_atomic
from prime_cli.runs.ids import RUN_ID_PATTERN, new_run_id
from prime_cli.runs.metadata import METADATA_FILE, RunDirError, read_metadata
from prime_cli.runs.status import RESUMABLE as RESUMABLE_STATUSES
from prime_cli.runs.status import RunStatus

from .schema import ROW_KEYS, EvalRunLayout, MetadataRecord, Rollout

logger = logging.getLogger(__name__)
PathLike = str | os.PathLike

RESULTS_FILE = EvalRunLayout.RESULTS
LOG_FILE = EvalRunLayout.LOG
__all__ = ["METADATA_FILE", "RESUMABLE_STATUSES", "ROW_KEYS", "RunDirError", "read_metadata"]  # for older importers


model_dir_name = EvalRunLayout.folder_name
default_base_dir = EvalRunLayout.runs_folder


def _fallback(obj: Any) -> Any:
    """What a value JSON cannot encode becomes: a plain equivalent, else its string."""
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        return obj.item()  # numpy / torch scalars
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, BaseException):
        return error_record(obj)
    return str(obj)


def _key(key: Any) -> str:
    """A dict key as JSON writes it (1 -> "1", True -> "true"); other keys as their str()."""
    if isinstance(key, str):
        return key
    return json.dumps(key) if key is None or isinstance(key, (bool, int, float)) else str(key)


def _clean(obj: Any) -> Any:
    """Recursive copy with NaN/inf as None, keys as strings and unknown values converted."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, dict):
        return {_key(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    converted = _fallback(obj)
    return converted if isinstance(converted, str) else _clean(converted)


def to_json(obj: Any, indent: int | None = None) -> str:
    """Strict JSON of `obj`: NaN/inf become null, unencodable values become strings."""
    try:
        return json_lines.dumps(obj, allow_nan=False, default=_fallback, indent=indent)
    except (ValueError, TypeError):  # NaN somewhere, or a non-string dict key
        return json_lines.dumps(_clean(obj), allow_nan=False, indent=indent)


def _encode(obj: Any, indent: int | None = None) -> bytes:
    return (to_json(obj, indent) + "\n").encode("utf-8")


def iter_results(run_dir: PathLike) -> Iterator[Rollout]:
    """Rows of results.jsonl. An invalid last line (truncated write) is skipped; one elsewhere is
    skipped with a warning naming its line number."""
    layout = EvalRunLayout(Path(run_dir))
    run_dir, path = layout.run_dir, layout.results_path
    if not path.is_file():
        if not layout.is_run():
            raise RunDirError(f"{path} not found: {run_dir} is not an eval run folder")
        return
    bad: tuple[int, str] | None = None
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if bad is not None:
                logger.warning("%s:%d: skipped an invalid line (%s)", path, *bad)
                bad = None
            try:
                row = json.loads(line)
            except ValueError as exc:
                bad = (lineno, str(exc))
                continue
            if not isinstance(row, dict):
                bad = (lineno, f"a JSON {type(row).__name__}, not an object")
                continue
            yield row
    if bad is not None:
        logger.debug("%s:%d: ignored a truncated last line (%s)", path, *bad)


def read_results(run_dir: PathLike) -> list[Rollout]:
    return list(iter_results(run_dir))


def _created_at(run_dir: Path) -> float:
    """Creation time of a run, for ordering: from its id, else its metadata date, else mtime."""
    match = RUN_ID_PATTERN.match(run_dir.name)
    if match:
        stamp = datetime.strptime(match.group(1), "%Y%m%d-%H%M%S").timestamp()
        return stamp + int(match.group(2), 16) / 4096
    try:
        return datetime.fromisoformat(str(read_metadata(run_dir)["date"])).timestamp()
    except (RunDirError, KeyError, ValueError, TypeError):
        return EvalRunLayout(run_dir).metadata_path.stat().st_mtime


def list_runs(base_dir: PathLike) -> list[Path]:
    """Run folders (those with a metadata.json) under `base_dir`, newest first."""
    base = Path(base_dir)
    if not base.is_dir():
        return []
    runs = [p for p in base.iterdir() if p.is_dir() and EvalRunLayout(p).is_run()]
    return sorted(runs, key=lambda p: (_created_at(p), p.name), reverse=True)


def find_resumable(base_dir: PathLike) -> Path | None:
    """The newest run left running, cancelled or failed, else None. No status (another tool's run)
    counts as finished."""
    for run_dir in list_runs(base_dir):
        try:
            status = read_metadata(run_dir).get("status")
        except RunDirError as exc:
            logger.warning("skipping %s", exc)
            continue
        if status in RESUMABLE_STATUSES:
            return run_dir
    return None


def completed_pairs(rows: Iterable[Rollout]) -> set[tuple[Any, Any]]:
    """(example_id, rollout_idx) of every saved row, errored or not."""
    return {(row.get("example_id"), row.get("rollout_idx")) for row in rows}


def errored_rows(rows: Iterable[Rollout]) -> list[Rollout]:
    return [row for row in rows if row.get("error")]


def state_to_row(state: dict[str, Any], rollout_idx: int, state_columns: Sequence[str] = ()) -> Rollout:
    """The results.jsonl row of one finished rollout (values are shared with `state`, not copied)."""
    row: Any = {key: state.get(key) for key in ROW_KEYS}
    error = row["error"]
    row.update(
        rollout_idx=rollout_idx,
        error=error_record(error) if isinstance(error, BaseException) else error,
        metrics=row["metrics"] or {},
        metrics_errors=row["metrics_errors"] or [],
        is_completed=bool(row["is_completed"]),
        is_truncated=bool(row["is_truncated"]),
        token_usage=state.get("usage"),
    )
    row.update((column, state.get(column)) for column in state_columns)
    return row


def _repair_tail(path: Path) -> None:
    """Make results.jsonl end with a newline: a truncated last line is dropped (temp + rename);
    a complete last row missing only its newline gets one."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        pos = keep = size
        while pos > 0:  # scan back in blocks to the last newline
            start = max(0, pos - 65536)
            fh.seek(start)
            block = fh.read(pos - start)
            if b"\n" in block:
                keep = start + block.rindex(b"\n") + 1
                break
            pos = keep = start
        fh.seek(keep)
        tail = fh.read()
    if not tail.strip():
        return
    with contextlib.suppress(ValueError):
        if isinstance(json.loads(tail), dict):  # a whole row, only its newline is missing
            with path.open("ab") as out:
                out.write(b"\n")
            return
    logger.warning("%s: dropping a truncated last line (%d bytes)", path, size - keep)

    def copy_head(out: IO[bytes]) -> None:
        with path.open("rb") as src:
            shutil.copyfileobj(src, out)
        out.truncate(keep)

    write_atomic(path, copy_head, durable=True)


class RunStore:
    """Writer of one run folder. Create a new run with `create`, resume one with `open`."""

    def __init__(self, run_dir: Path, metadata: MetadataRecord) -> None:
        self.layout = EvalRunLayout(run_dir)
        self.run_dir = run_dir
        self.metadata = metadata
        self.metadata_path = self.layout.metadata_path
        self.results_path = self.layout.results_path
        self.log_path = self.layout.log_path
        self._lock = threading.Lock()
        self._fh: IO[bytes] | None = self.results_path.open("ab")

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @classmethod
    def create(cls, base_dir: PathLike, metadata: MetadataRecord) -> RunStore:
        base = Path(base_dir)
        base.mkdir(parents=True, exist_ok=True)
        run_dir = base / new_run_id()
        while run_dir.exists():
            run_dir = base / new_run_id()
        return cls.create_at(run_dir, metadata)

    @classmethod
    def create_at(cls, run_dir: PathLike, metadata: MetadataRecord) -> RunStore:
        """A new run in exactly `run_dir` (created; it must not exist yet)."""
        run_dir = Path(run_dir)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir()
        meta: MetadataRecord = {**metadata, "date": datetime.now().astimezone().isoformat(timespec="seconds"),
                                "status": RunStatus.RUNNING}
        write_atomic(EvalRunLayout(run_dir).metadata_path, _encode(meta, indent=2), durable=True)
        return cls(run_dir, meta)

    @classmethod
    def open(cls, run_dir: PathLike) -> RunStore:
        """Reopen a run to append to it (resume). A truncated last row is dropped first."""
        run_dir = Path(run_dir)
        metadata = read_metadata(run_dir)
        results = EvalRunLayout(run_dir).results_path
        if results.is_file():
            _repair_tail(results)
        return cls(run_dir, metadata)

    def append(self, row: Rollout) -> None:
        """Write one row as a JSON line and flush it to the OS at once."""
        line = _encode(row)
        with self._lock:
            if self._fh is None:
                raise ValueError(f"{self.run_dir}: the store is closed")
            self._fh.write(line)
            self._fh.flush()

    def update_metadata(self, **fields: Any) -> MetadataRecord:
        """Merge `fields` into metadata.json and rewrite it atomically. `date` never changes."""
        fields.pop("date", None)
        with self._lock:
            self.metadata.update(fields)  # type: ignore[typeddict-item]
            data = _encode(self.metadata, indent=2)
            write_atomic(self.metadata_path, data, durable=True)
        return self.metadata

    def rewrite_results(self, rows: Iterable[Rollout]) -> None:
        """Replace results.jsonl with `rows` atomically; later appends go to the new file."""
        with self._lock:
            reopen = self._fh is not None
            if reopen:
                self._fh.close()
            try:
                write_atomic(self.results_path, lambda fh: fh.writelines(_encode(r) for r in rows), durable=True)
            finally:
                if reopen:
                    self._fh = self.results_path.open("ab")

    def read_results(self) -> list[Rollout]:
        return read_results(self.run_dir)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
