"""Where a `prime gepa run` process spent its wall time: metadata.json's `stages`, printed at -v.

Every number is wall-clock seconds of this process (a resumed run measures its own process only):

- startup_s: from the process's start (the interpreter, imports, parsing the flags) to the command's start
- load_s: the config, the environment loaded (once) and its rows drawn, the endpoints and the cost cap checked
- local_server_s: starting or finding the embedded model's server (only with `-m local` / `-M local`)
- setup_s: the model clients (importing the HTTP client library) and the run folder written
- search_s: the search, from its start to its last commit saved
- seed_validation_s: part of search_s, from the search's start to the seed prompt scored on the
  validation rows (it overlaps the first proposal; absent when a resumed run had scored it already)
- test_s: the held-out test passes still running after the search (what ran in idle slots during the
  search is not counted again)
- finish_s: the last files written
- total_s: the process's start to the end of finish_s (the result is printed after it)

startup, load, local_server, setup, search, test and finish follow one another: their sum is total_s
but for the moments between them.
"""

from __future__ import annotations

import os
import time
from typing import Any

ORDER = ("startup_s", "load_s", "local_server_s", "setup_s", "search_s", "test_s", "finish_s")
"""The stages that follow one another, in the order they happen."""


def process_age() -> float | None:
    """Seconds since this process started, from the OS (Linux's /proc); None where it cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()  # the command name may hold spaces and ")"
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: clock ticks after boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Stages:
    """Marks on one monotonic clock, whose zero is the process's start. `from_process_start=False` (a search
    run from Python rather than by the command): no startup_s, and total_s spans the stages marked."""

    def __init__(self, from_process_start: bool = True) -> None:
        age = process_age() if from_process_start else None
        self._zero = time.monotonic() - (age or 0.0)
        self._known_start = age is not None
        self._marks: dict[str, tuple[float, float]] = {}
        self._open: dict[str, float] = {}
        if age is not None:
            self._marks["startup_s"] = (0.0, age)

    def now(self) -> float:
        return time.monotonic() - self._zero

    def begin(self, name: str) -> None:
        self._open[name] = self.now()

    def end(self, name: str) -> None:
        """Close a stage begun with `begin` (a second end of the same stage keeps the first)."""
        start = self._open.pop(name, None)
        if start is not None:
            self._marks[name] = (start, self.now())

    def record(self) -> dict[str, Any]:
        """metadata.json's `stages`: seconds per stage and total_s, rounded to the millisecond."""
        out: dict[str, Any] = {name: round(end - start, 3) for name, (start, end) in self._marks.items()}
        spans = self._marks.values()
        first = 0.0 if self._known_start else min((start for start, _ in spans), default=0.0)
        out["total_s"] = round(max((end for _, end in spans), default=first) - first, 3)
        return out


def stages_line(record: dict[str, Any]) -> str:
    """-v: `time: 3.10 s in all: startup 0.31 s, load 0.12 s, ... search 1.60 s (seed validation 0.40 s of it), ...`"""
    parts = []
    for name in ORDER:
        if name not in record:
            continue
        part = f"{name.removesuffix('_s').replace('_', ' ')} {record[name]:.2f} s"
        if name == "search_s" and "seed_validation_s" in record:
            part += f" (seed validation {record['seed_validation_s']:.2f} s of it)"
        parts.append(part)
    return f"time: {record.get('total_s', 0.0):.2f} s in all: " + ", ".join(parts)
