"""The one way prime rewrites a whole file: a temporary file in the same folder, renamed over the old one.

A reader (the TUI, a resuming run, the trainer polling for its batch) sees the old file or the new one,
never half of one. Every writer of a run file goes through here: eval metadata and results, the TUI's
row index, GEPA's run folder, `prime serve`'s server records and the trainer plugin (through
`prime_cli.train.plugin_api`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from prime_cli.runs import json_lines

NEW_FILE_MODE = 0o644  # mkstemp's 0o600 would hide a run's files from the user's other accounts


def write_atomic(path: str | os.PathLike[str], content: bytes | Callable[[IO[bytes]], Any], *,
                 durable: bool = False) -> None:
    """Write `content` (bytes, or a function that writes to a binary file) to `path` atomically.

    The file keeps the mode of the one it replaces. `durable` also fsyncs the file before the rename
    and its folder after it, so the new content survives a power cut (a resume state, eval metadata);
    without it a crash may leave the old file, never a torn one. The temporary file is removed when
    anything fails."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else NEW_FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            if isinstance(content, bytes):
                fh.write(content)
            else:
                content(fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:  # the rename itself is an entry of the folder: durable once the folder is synced
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def write_text_atomic(path: str | os.PathLike[str], text: str, *, durable: bool = False) -> None:
    write_atomic(path, text.encode("utf-8"), durable=durable)


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, indent: int | None = None,
                      durable: bool = False) -> None:
    """`obj` as JSON (one trailing newline); values JSON cannot hold are written as strings."""
    text = json_lines.dumps(obj, indent=indent, default=str) + "\n"
    write_text_atomic(path, text, durable=durable)


def write_jsonl_atomic(path: str | os.PathLike[str], rows: Any, *, durable: bool = False) -> None:
    """`rows` (any iterable of JSON values) as one JSON line each."""
    write_text_atomic(path, "".join(json_lines.dumps(row, default=str) + "\n" for row in rows),
                      durable=durable)
