"""One eval run as the screens see it: metadata, a lazy row index, and the small fields of every row.

The first screenful is read synchronously (`open_first`); `load_all`, which screens run in a worker
thread, takes every row's small fields and line offsets from the run's side index
(results.index) when it matches results.jsonl, else parses the file and writes the index for
next time (a finished run in a writable folder). `refresh` follows a run that is still being written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prime_cli.records.eval_run import MetadataRecord, Rollout, Summary
from prime_cli.results.eval_reader import (
    SCAN_SLICE,
    ResultsIndex,
    metadata_mtime,
    parse_line,
    slim_row,
)
from prime_cli.results.foreign_runs import resolve_run_dir
from prime_cli.results.row_columns import RowColumns, SmallRow
from prime_cli.results.row_index import load_index, results_stamp, save_index
from prime_cli.results.summary import METADATA_SUMMARY_KEYS, summarize
from prime_cli.runs.metadata import RunDirError, read_metadata
from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible
from prime_cli.tui.filters import RowFilter
from prime_cli.tui.rows import metric_names, sort_value

FIRST_PAINT_BYTES = 512 << 10


class RunModel:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = resolve_run_dir(Path(run_dir))  # another tool's run: its converted copy
        self.metadata = MetadataRecord(**read_metadata(self.run_dir))
        self._meta_mtime = metadata_mtime(self.run_dir)
        self.index = ResultsIndex(self.run_dir)
        self.columns = RowColumns()  # every row's small fields, once loaded
        self._views: list[SmallRow] = []
        self.from_index = False  # the rows came from results.index
        self.index_written = False
        self._stamp: dict[str, int] | None = None
        self._summary: tuple[int, Summary] | None = None  # (version, summary)
        self._generation = 0
        self._lock = threading.Lock()
        self.loaded = False
        self.version = 0  # bumped whenever rows or metadata change, so every screen sees it

    @property
    def status(self) -> RunStatus | str:
        return RunStatus.read(self.metadata.get("status"))

    @property
    def live(self) -> bool:
        return self.status == RunStatus.RUNNING

    @property
    def title(self) -> str:
        meta = self.metadata
        return visible(f"{meta.get('env_id', '?')} · {meta.get('model', '?')} · {self.run_dir.name}")

    def __len__(self) -> int:
        return len(self.index)

    def open_first(self) -> None:
        """Index the first rows, enough for a first screen, without reading the whole file.
        Does nothing when a full load is already under way (it indexes the file itself)."""
        if self._lock.acquire(blocking=False):
            try:
                if not len(self.index):
                    self.index.scan(FIRST_PAINT_BYTES)
            finally:
                self._lock.release()

    @property
    def slim(self) -> list[SmallRow]:
        """Every loaded row's small fields, as read-only mappings over `columns` (sections such as
        metrics are mappings too, not dicts)."""
        views, count = self._views, len(self.columns)  # _views is emptied whenever columns is replaced
        if len(views) != count:
            views = self._views = views[:count] + [self.columns.row(i) for i in range(len(views), count)]
        return views

    def load_all(self, progress: Any = None) -> None:
        """Index the rest of the file and keep every row's small fields (thread-safe)."""
        with self._lock:
            self._stamp = results_stamp(self.run_dir)  # before reading: a file changed meanwhile makes a stale index
            if not self.loaded:
                self._adopt_index()
            while self.index.scan(SCAN_SLICE):  # in slices, so the UI thread can read rows between them
                pass
            self.index.scan()
            self._sync_slim(progress)
            self.loaded = True
            self.version += 1

    def save_index(self) -> bool:
        """After `load_all` parsed results.jsonl, write the side index so the next open is quick.
        Skipped for a run still being written, and when the folder is read-only (the rows stay
        in memory). True when an index was written."""
        with self._lock:
            if self.from_index or self.index_written or self.live or self._stamp is None or not len(self.columns):
                return False
            starts, ends, scanned = self.index.offsets()
            self.index_written = save_index(self.run_dir, self.columns, starts, ends, scanned, self._stamp)
            return self.index_written

    def _adopt_index(self) -> None:
        """Take rows and offsets from the side index when it matches results.jsonl."""
        found = load_index(self.run_dir)
        if found is None:
            return
        self.index.adopt(found.starts, found.ends, found.scanned, found.identity)
        self.columns, self._views, self._generation = found.columns, [], self.index.generation
        self.from_index = True

    def _sync_slim(self, progress: Any = None) -> None:
        if self.index.generation != self._generation:  # the file was rewritten (sorted) at the end
            self.columns, self._views, self._generation = RowColumns(), [], self.index.generation
            self.from_index = False
        total = len(self.index)
        for i in range(len(self.columns), total):
            self.columns.append(parse_line(self.index.raw(i), i))
            if i % 1000 == 999:
                time.sleep(0.0005)  # hand the GIL to the UI thread now and then: it stays responsive
            if progress is not None and i % 5000 == 0:
                progress(i, total)

    def refresh(self) -> bool:
        """Pick up new rows and a rewritten metadata.json; True when anything changed."""
        with self._lock:
            changed = False
            mtime = metadata_mtime(self.run_dir)
            if mtime != self._meta_mtime:
                try:
                    self.metadata = MetadataRecord(**read_metadata(self.run_dir))
                    self._meta_mtime, changed = mtime, True
                except RunDirError:
                    pass  # caught mid-rename: read it next time
            generation, before = self.index.generation, len(self.index)
            self.index.scan()
            if self.index.generation != generation or len(self.index) != before:
                changed = True
            if self.loaded:
                self._sync_slim()
            if changed:
                self.version += 1
            return changed

    def catch_up(self, seen_version: int) -> bool:
        """Live mode, for a screen that last drew `seen_version`: pick up appended rows and a rewritten
        metadata.json while the run is written; True when that screen should draw again."""
        if not self.loaded:
            return False
        if self.live:
            self.refresh()
        return self.version != seen_version

    def row(self, i: int) -> Rollout:
        return self.index.row(i)

    def small(self, i: int) -> Mapping[str, Any]:
        """Row `i`'s small fields: from memory once loaded, else parsed from the file."""
        return self.columns.row(i) if i < len(self.columns) else slim_row(self.index.row(i))

    def metric_names(self) -> list[str]:
        names = list((self.metadata.get("avg_metrics") or {}).keys())
        rows = self.slim or [self.small(i) for i in range(min(len(self), 200))]
        return names + [n for n in metric_names(rows) if n not in names]

    def summary(self, compute: bool = True) -> Summary | None:
        """The run's summary: computed from the rows once loaded (once per version; slow for a big
        run, so screens call it from a worker), else from a finished run's metadata, else None
        (still loading). With `compute=False`, a loaded run whose summary is not computed yet for
        this version answers like one still loading."""
        if self.loaded:
            cached = self._summary
            if cached is not None and cached[0] == self.version:
                return cached[1]
            if compute:
                version = self.version
                rows = [self.columns.as_dict(i) for i in range(len(self.columns))]
                summary = summarize(rows, float((self.metadata.get("summary") or {}).get("pass_threshold", 1.0)))
                self._summary = (version, summary)
                return summary
        meta = self.metadata
        if self.status != RunStatus.RUNNING and isinstance(meta.get("summary"), dict):
            return {**meta["summary"], **{k: meta.get(k) for k in METADATA_SUMMARY_KEYS}}
        return None

    @property
    def summary_ready(self) -> bool:
        return self.loaded and self._summary is not None and self._summary[0] == self.version

    def select(self, row_filter: RowFilter | None, sort_key: str, descending: bool) -> list[int]:
        """Row numbers passing `row_filter`, sorted by `sort_key` ("row" = file order).
        Needs `load_all` first."""
        rows = self.slim
        indices: list[int] = list(range(len(rows)))
        if row_filter is not None:
            if row_filter.needs_text:
                indices = [i for i in indices if row_filter(parse_line(self.index.raw(i), i))]
            else:
                indices = [i for i in indices if row_filter(rows[i])]
        if sort_key != "row":
            ranks = {i: sort_value(rows[i], sort_key) for i in indices}
            indices.sort(key=ranks.__getitem__, reverse=descending)
            if descending:  # keep missing values last either way
                indices = [i for i in indices if ranks[i][0] != 2] + [i for i in indices if ranks[i][0] == 2]
        elif descending:
            indices.reverse()
        return indices

    def close(self) -> None:
        self.index.close()
