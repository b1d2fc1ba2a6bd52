"""The one JSON-lines reader and appender for run files, with one rule for a torn line.

A run killed mid-write leaves its last line cut short: a last line that is not JSON and has no trailing
newline is torn, and is left out when read and cut away before the next append. Any other bad line (not
JSON, or not an object) is damage, not a write in progress: it is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prime_cli.runs.json_lines import dumps
from prime_cli.runs.metadata import RunDirError


class JsonLinesError(RunDirError):
    """A line of a run's JSON-lines file, other than a torn last one, is not a JSON object."""


def _object(path: Path, number: int, line: bytes) -> dict[str, Any] | None:
    """The line's object; None when the line is not valid JSON (its caller decides if it is torn)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        raise JsonLinesError(f"{path}:{number}: a JSON {type(value).__name__}, expected an object; "
                             "fix or delete that line")
    return value


def parse_whole_line(path: Path, number: int, line: bytes) -> dict[str, Any]:
    """The object on line `number` of `path`, a line known to be whole (a tail that reads up to the last
    newline); a JsonLinesError naming file:line when it is not a JSON object."""
    row = _object(path, number, line)
    if row is None:
        raise JsonLinesError(f"{path}:{number}: not valid JSON; fix or delete that line")
    return row


def iter_json_lines(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The objects of a JSON-lines file in order (none when it does not exist); blank lines are skipped."""
    path = Path(path)
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if line.endswith(b"\n"):
                yield parse_whole_line(path, number, line)
            elif (row := _object(path, number, line)) is not None:
                yield row
            # else: the torn last line of a write cut short: left out


def read_json_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return list(iter_json_lines(path))


def repair_torn_tail(path: str | os.PathLike[str]) -> None:
    """Make the file end at a line's end: a torn last line is cut away; a whole last object written
    without its newline gets one."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    tail = data[start:]
    with path.open("r+b") as fh:
        if tail.strip() and _object(path, data.count(b"\n") + 1, tail) is not None:
            fh.seek(len(data))
            fh.write(b"\n")
        else:
            fh.truncate(start)


class JsonLinesAppender:
    """Appends one object a line to a run file, repairing a torn last line first."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        repair_torn_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, obj: Any) -> None:
        self._fh.write(dumps(obj) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
