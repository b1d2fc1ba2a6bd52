"""The one JSON-lines reader and appender for run files, with one rule for a torn line.

A run killed mid-write leaves its last line cut short: a last line that is not JSON and has no trailing
newline is torn, and is left out when read and cut away before the next append. Any other bad line (not
JSON, or not an object) is damage, not a write in progress: it is an error naming the file and line.
Every run file is appended to through `JsonLinesAppender` (kept open) or `append_json_line` (one line);
no module outside prime_cli/records opens a file for appending (tests/records/test_run_file_writers.py).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from prime_cli.runs.json_lines import dumps
from prime_cli.runs.metadata import RunDirError

logger = logging.getLogger(__name__)


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


_BLOCK = 1 << 16


def _last_line_start(fh: BinaryIO, size: int) -> int:
    """Where the file's last line starts: just after its last newline, found scanning back in blocks."""
    end = size
    while end > 0:
        start = max(0, end - _BLOCK)
        fh.seek(start)
        block = fh.read(end - start)
        if (newline := block.rfind(b"\n")) >= 0:
            return start + newline + 1
        end = start
    return 0


def repair_torn_tail(path: str | os.PathLike[str]) -> None:
    """Make the file end at a line's end: a torn last line is cut away (with a warning); a whole last
    object written without its newline gets one. Reads only the file's last line."""
    path = Path(path)
    try:
        fh = path.open("r+b")
    except FileNotFoundError:
        return
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        start = _last_line_start(fh, size)
        fh.seek(start)
        tail = fh.read()
        if not tail.strip():
            return
        fh.seek(0)
        number = sum(block.count(b"\n") for block in iter(lambda: fh.read(_BLOCK), b"")) + 1
        if _object(path, number, tail) is not None:
            fh.seek(size)
            fh.write(b"\n")
        else:
            logger.warning("%s:%d: dropping a torn last line (%d bytes)", path, number, size - start)
            fh.truncate(start)


def append_json_line(path: str | os.PathLike[str], obj: Any, encode: Callable[[Any], str] = dumps) -> None:
    """Append one object as a line to a run file (opened and closed again), a torn last line repaired first."""
    with JsonLinesAppender(path, encode) as appender:
        appender.append(obj)


class JsonLinesAppender:
    """Appends one object a line to a run file, repairing a torn last line first. Each line is flushed
    to the OS as it is written. `encode` turns an object into its one-line JSON text (default `dumps`;
    it must not hold a newline)."""

    def __init__(self, path: str | os.PathLike[str], encode: Callable[[Any], str] = dumps) -> None:
        self.path = Path(path)
        self._encode = encode
        repair_torn_tail(self.path)
        self._fh: BinaryIO | None = self.path.open("ab")

    def append(self, obj: Any) -> None:
        if self._fh is None:
            raise ValueError(f"{self.path}: the appender is closed")
        self._fh.write((self._encode(obj) + "\n").encode("utf-8"))
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> JsonLinesAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
