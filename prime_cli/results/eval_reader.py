"""Read-side helpers for browsing runs: find run folders, and index a results.jsonl lazily.

`ResultsIndex` never parses the whole file before it is asked to: it records where each complete
line starts (a cheap byte scan, done in slices) and parses a row only when it is read. `scan()`
picks up lines appended since the last call, so a run that is still being written can be followed;
a partial last line (a write in progress, or a killed run) is left out until it is complete.
Rows are read with `prime_cli.records.eval_rows.iter_results`'s rules: see DESIGN.md, "Eval results on disk".
"""

from __future__ import annotations

import json
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_cli.records.eval_run import EvalRunLayout, MetadataRecord, Rollout
from prime_cli.records.header import RunKind, read_header
from prime_cli.records.training_run import find_training_runs, read_training_run
from prime_cli.results.foreign_runs import TRACES_FILE, resolve_run_dir
from prime_cli.results.row_columns import HEAVY_KEYS
from prime_cli.runs.layouts import GepaRunLayout
from prime_cli.runs.metadata import RunDirError, read_metadata
from prime_cli.runs.status import RunStatus

SCAN_SLICE = 4 << 20
_SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache"}


@dataclass
class RunEntry:
    """One run folder as the browser lists it (an eval run, a GEPA run or a `prime train` output folder)."""

    kind: RunKind
    path: Path
    env_id: str
    model: str
    run_id: str
    status: RunStatus | str  # a string this version does not know is shown as it is
    date: str
    avg_reward: float | None
    num_examples: int | None = None
    rollouts_per_example: int | None = None
    num_candidates: int | None = None  # a GEPA run's
    metadata: MetadataRecord = field(default_factory=dict, repr=False)  # type: ignore[assignment]

    @property
    def size_text(self) -> str:
        if self.kind == "training":
            return f"{self.num_examples} steps" if self.num_examples is not None else ""
        if self.kind == "gepa":
            return f"{self.num_candidates} cand." if self.num_candidates is not None else ""
        if self.num_examples is None:
            return ""
        return f"{self.num_examples}x{self.rollouts_per_example or 1}"


def _is_gepa_dir(run_dir: Path, metadata: MetadataRecord) -> bool:
    return "reflection_model" in metadata or GepaRunLayout(run_dir).looks_like_run()


def read_entry(run_dir: Path) -> RunEntry:
    """The browser entry of one run folder (another tool's: of its converted copy). Raises RunDirError
    when it is not a run."""
    run_dir = resolve_run_dir(run_dir)
    meta = read_metadata(run_dir)
    # a header names the kind; a folder written before headers is told by its files
    header = read_header(meta, lambda: "gepa" if _is_gepa_dir(run_dir, meta) else "eval", run_dir.name)
    gepa = header["kind"] == "gepa"
    avg = meta.get("best_score") if gepa else meta.get("avg_reward")
    return RunEntry(
        kind="gepa" if gepa else "eval",
        path=run_dir,
        env_id=str(meta.get("env_id") or "?"),
        model=str(meta.get("model") or "?"),
        run_id=header["run_id"],
        status=RunStatus.read(header["status"]),
        date=str(meta.get("date") or meta.get("created_at") or ""),
        avg_reward=avg if isinstance(avg, (int, float)) else None,
        num_examples=meta.get("num_examples"),
        rollouts_per_example=meta.get("rollouts_per_example"),
        num_candidates=meta.get("num_candidates") if gepa else None,
        metadata=meta,
    )


def training_entry(run_dir: Path) -> RunEntry:
    """The browser entry of a training run folder; num_examples counts its trained steps, its date is when
    the run was created (its header's), or for a folder without a manifest when it was last written."""
    from datetime import UTC, datetime  # lazy: already loaded

    run = read_training_run(run_dir)
    created = run.header["created_at"] or datetime.fromtimestamp(run.mtime, UTC).isoformat(timespec="seconds")
    return RunEntry(kind="training", path=run_dir, env_id=",".join(run.env_ids) or "?", model=run.model,
                    run_id=run_dir.name, status=run.status, date=created,
                    avg_reward=run.last_reward, num_examples=run.trained_steps)


def _walk_run_dirs(top: Path, max_depth: int) -> Iterator[Path]:
    """Folders holding a metadata.json (or verifiers' traces.jsonl) under `top` (itself included), not
    descending into runs."""
    if EvalRunLayout(top).is_run() or (top / TRACES_FILE).is_file():
        yield top
        return
    if max_depth <= 0:
        return
    try:
        children = sorted(p for p in top.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        yield from _walk_run_dirs(child, max_depth - 1)


def default_roots(cwd: Path) -> list[Path]:
    """Where runs live by default: `./environments/*/outputs` and `./outputs`."""
    roots = sorted(p for p in (cwd / "environments").glob("*/outputs") if p.is_dir())
    if (cwd / "outputs").is_dir():
        roots.append(cwd / "outputs")
    return roots


def discover_runs(paths: list[Path], max_depth: int = 6, training_depth: int = 4) -> list[RunEntry]:
    """Every eval, GEPA and training run under `paths` (eval and GEPA runs down to `max_depth` folders,
    training runs to `training_depth`), ordered by environment, model, then newest first.
    Folders whose metadata.json cannot be read are skipped."""
    entries: dict[Path, RunEntry] = {}
    for top in paths:
        for run_dir in _walk_run_dirs(Path(top), max_depth):
            try:
                entries[run_dir.resolve()] = read_entry(run_dir)
            except RunDirError:
                continue
        for run_dir in find_training_runs(Path(top), training_depth):
            entries[run_dir.resolve()] = training_entry(run_dir)
    ordered = sorted(entries.values(), key=lambda e: (e.date, e.run_id), reverse=True)
    return sorted(ordered, key=lambda e: (e.env_id, e.model, e.kind))


def slim_row(row: Rollout) -> Rollout:
    """A row without its big fields (prompt, completion, answer, info)."""
    return {key: value for key, value in row.items() if key not in HEAVY_KEYS}  # type: ignore[return-value]


class ResultsIndex:
    """Byte offsets of the complete lines of a results.jsonl, extended by `scan()`.

    Thread-safe: a worker thread may scan while the UI thread reads rows. A file replaced by a
    rename (the store's final sort) or truncated is detected and indexed again from the start.
    """

    def __init__(self, run_dir: Path, cache_size: int = 4096) -> None:
        self.path = EvalRunLayout(Path(run_dir)).results_path
        self._starts = array("q")
        self._ends = array("q")
        self._scanned = 0  # bytes looked at so far: all complete lines before it are indexed
        self._identity: tuple[int, int] | None = None
        self._lock = threading.RLock()
        self._fh: Any = None
        self._cache: OrderedDict[int, Rollout] = OrderedDict()
        self._cache_size = cache_size
        self.generation = 0  # bumped whenever the file was replaced and indexing restarted

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _check_replaced(self) -> bool:
        """Reset when the file is a new one (renamed over) or shorter than what was indexed."""
        try:
            stat = self.path.stat()
        except OSError:
            return False
        identity = (stat.st_dev, stat.st_ino)
        if self._identity is not None and (identity != self._identity or stat.st_size < self._scanned):
            self.close()
            self._starts, self._ends, self._scanned = array("q"), array("q"), 0
            self._cache.clear()
            self.generation += 1
        self._identity = identity
        return True

    def _handle(self) -> Any:
        if self._fh is None:
            self._fh = self.path.open("rb")
        return self._fh

    def scan(self, max_bytes: int | None = None) -> int:
        """Index complete lines appended since the last scan, reading about `max_bytes` at most
        (None: to the end). Returns how many rows were added (0 when the file does not exist)."""
        with self._lock:
            if not self._check_replaced():
                return 0
            before = len(self._starts)
            fh = self._handle()
            budget = max_bytes
            while budget is None or budget > 0:
                fh.seek(self._scanned)
                chunk = fh.read(SCAN_SLICE if budget is None else min(SCAN_SLICE, budget))
                if not chunk:
                    break
                if budget is not None:
                    budget -= len(chunk)
                last_newline = chunk.rfind(b"\n")
                if last_newline >= 0:
                    self._index_chunk(chunk, last_newline)
                elif len(chunk) < SCAN_SLICE or not self._index_long_line(fh):
                    break  # what is left is a partial line (or the budget ran out inside one)
            if budget is None:
                self._index_whole_tail(fh)
            return len(self._starts) - before

    def _index_chunk(self, chunk: bytes, last_newline: int) -> None:
        base, pos = self._scanned, 0
        while pos <= last_newline:
            end = chunk.index(b"\n", pos)
            if chunk[pos:end].strip():
                self._starts.append(base + pos)
                self._ends.append(base + end)
            pos = end + 1
        self._scanned = base + last_newline + 1

    def _index_long_line(self, fh: Any) -> bool:
        """Index one line longer than a slice; False when it has no newline yet."""
        start = pos = self._scanned
        fh.seek(start)
        while True:
            chunk = fh.read(SCAN_SLICE)
            if not chunk:
                return False
            newline = chunk.find(b"\n")
            if newline >= 0:
                self._starts.append(start)
                self._ends.append(pos + newline)
                self._scanned = pos + newline + 1
                return True
            pos += len(chunk)

    def _index_whole_tail(self, fh: Any) -> None:
        """At the end of the file, a last line lacking only its newline but holding a whole row
        counts as a row (a partial line never parses as a JSON object)."""
        fh.seek(self._scanned)
        tail = fh.read(SCAN_SLICE + 1)
        if not tail.strip() or len(tail) > SCAN_SLICE:
            return
        try:
            whole = isinstance(json.loads(tail), dict)
        except ValueError:
            return
        if whole:
            self._starts.append(self._scanned)
            self._ends.append(self._scanned + len(tail))
            self._scanned += len(tail)

    def offsets(self) -> tuple[array, array, int]:
        """Where each indexed line starts and ends, and how many bytes were looked at."""
        with self._lock:
            return array("q", self._starts), array("q", self._ends), self._scanned

    def adopt(self, starts: list[int], ends: list[int], scanned: int, identity: tuple[int, int]) -> None:
        """Take line offsets found earlier (a side index) for the file `identity` names; a later
        `scan()` goes on from `scanned`, or starts over if the file has been replaced since."""
        with self._lock:
            self.close()  # reopened on the file as it is now
            self._starts, self._ends = array("q", starts), array("q", ends)
            self._scanned, self._identity = scanned, identity
            self._cache.clear()

    def raw(self, i: int) -> bytes:
        with self._lock:
            fh = self._handle()
            fh.seek(self._starts[i])
            return fh.read(self._ends[i] - self._starts[i])

    def row(self, i: int) -> Rollout:
        """Row `i` (file order), parsed on demand and cached. A line that is not a JSON object
        comes back as a row whose error says so."""
        with self._lock:
            cached = self._cache.get(i)
            if cached is not None:
                self._cache.move_to_end(i)
                return cached
            row = parse_line(self.raw(i), i)
            self._cache[i] = row
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return row

    def iter_rows(self, start: int = 0, stop: int | None = None) -> Iterator[Rollout]:
        """Parse rows start..stop without caching them (for one pass over many rows)."""
        stop = len(self) if stop is None else stop
        for i in range(start, stop):
            yield parse_line(self.raw(i), i)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def parse_line(line: bytes, index: int) -> Rollout:
    try:
        row = json.loads(line)
    except ValueError as exc:
        return {"error": {"type": "InvalidLine", "message": f"row {index + 1} is not valid JSON ({exc})"}}
    if not isinstance(row, dict):
        return {"error": {"type": "InvalidLine", "message": f"row {index + 1} is a JSON {type(row).__name__}"}}
    return row


def metadata_mtime(run_dir: Path) -> float:
    try:
        return os.stat(EvalRunLayout(Path(run_dir)).metadata_path).st_mtime
    except OSError:
        return 0.0
