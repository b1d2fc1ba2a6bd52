"""The eval run writer: creates a run folder, appends rows, rewrites metadata.json, and finds the
run to resume.

`<root>/outputs/evals/<env_id>--<model>/<run_id>/` holds metadata.json (status "running" at start,
rewritten atomically), results.jsonl (one row per finished rollout, appended through
prime_cli/records' JsonLinesAppender in `to_json`'s strict JSON and flushed at once) and eval.log.
Whole-file rewrites go to a temporary file that is renamed over the old one. A run killed mid-write
leaves a torn last line: the reader (prime_cli/records/eval_rows.py) leaves it out, the appender cuts
it away before the next row. See DESIGN.md, "Eval results on disk".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from prime_cli.envs.errors import error_record
from prime_cli.records.eval_rows import read_results, to_json
from prime_cli.records.eval_run import (
    ROW_KEYS,
    EvalRunLayout,
    MetadataRecord,
    PathLike,
    Rollout,
)
from prime_cli.records.header import header_update, new_header, with_header
from prime_cli.records.json_lines import JsonLinesAppender
from prime_cli.runs.atomic import write_atomic
from prime_cli.runs.ids import RUN_ID_PATTERN, new_run_id
from prime_cli.runs.metadata import RunDirError, read_metadata
from prime_cli.runs.status import RESUMABLE

logger = logging.getLogger(__name__)

model_dir_name = EvalRunLayout.folder_name
default_base_dir = EvalRunLayout.runs_folder


def _encode(obj: Any, indent: int | None = None) -> bytes:
    return (to_json(obj, indent) + "\n").encode("utf-8")


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
        if status in RESUMABLE:
            return run_dir
    return None


def completed_pairs(rows: Iterable[Rollout]) -> set[tuple[Any, Any]]:
    """(example_id, rollout_idx) of every saved row, errored or not."""
    return {(row.get("example_id"), row.get("rollout_idx")) for row in rows}


def errored_rows(rows: Iterable[Rollout]) -> list[Rollout]:
    return [row for row in rows if row.get("error")]


def unscored_if_errored(row: Rollout) -> Rollout:
    """`row` with `reward` and every metric value null when it ended with an error: an errored rollout is
    left out of every score, never scored 0, and the saved data say so (the metric names are kept). Rows
    written before this (errored with reward 0.0) are still read right: readers skip a row by its `error`."""
    if row.get("error"):
        metrics = row.get("metrics")
        row["reward"] = None
        row["metrics"] = {name: None for name in metrics} if isinstance(metrics, dict) else {}
    return row


def state_to_row(state: dict[str, Any], rollout_idx: int, state_columns: Sequence[str] = ()) -> Rollout:
    """The results.jsonl row of one finished rollout (values are shared with `state`, not copied; an
    errored rollout's reward and metrics are null, see `unscored_if_errored`)."""
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
    return unscored_if_errored(row)


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
        self._rows: JsonLinesAppender | None = JsonLinesAppender(self.results_path, encode=to_json)

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
        meta: MetadataRecord = {**with_header(new_header("eval", run_dir.name), metadata),  # type: ignore[typeddict-item]
                                "date": datetime.now().astimezone().isoformat(timespec="seconds")}
        write_atomic(EvalRunLayout(run_dir).metadata_path, _encode(meta, indent=2), durable=True)
        return cls(run_dir, meta)

    @classmethod
    def open(cls, run_dir: PathLike) -> RunStore:
        """Reopen a run to append to it (resume). A torn last row is cut away first (by the appender)."""
        run_dir = Path(run_dir)
        return cls(run_dir, read_metadata(run_dir))

    def append(self, row: Rollout) -> None:
        """Write one row as a JSON line and flush it to the OS at once."""
        with self._lock:
            if self._rows is None:
                raise ValueError(f"{self.run_dir}: the store is closed")
            self._rows.append(row)

    def update_metadata(self, **fields: Any) -> MetadataRecord:
        """Merge `fields` into metadata.json and rewrite it atomically. `date` never changes."""
        fields.pop("date", None)
        with self._lock:
            self.metadata.update(fields, **header_update(self.metadata, fields))  # type: ignore[typeddict-item]
            data = _encode(self.metadata, indent=2)
            write_atomic(self.metadata_path, data, durable=True)
        return self.metadata

    def rewrite_results(self, rows: Iterable[Rollout]) -> None:
        """Replace results.jsonl with `rows` atomically; later appends go to the new file."""
        with self._lock:
            reopen = self._rows is not None
            if self._rows is not None:
                self._rows.close()
            try:
                write_atomic(self.results_path, lambda fh: fh.writelines(_encode(r) for r in rows), durable=True)
            finally:
                if reopen:
                    self._rows = JsonLinesAppender(self.results_path, encode=to_json)

    def read_results(self) -> list[Rollout]:
        return read_results(self.run_dir)

    def close(self) -> None:
        with self._lock:
            if self._rows is not None:
                self._rows.close()
                self._rows = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
