"""JSON text that stays on one line for every reader.

`json.dumps(..., ensure_ascii=False)` keeps non-ASCII text readable in the files, but writes U+2028,
U+2029 and NEL (U+0085) raw: Python's str.splitlines(), JavaScript and many log tools end a line on
them, cutting a JSONL row in two. They are escaped here (the same JSON value).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def one_line(text: str) -> str:
    """JSON text from json.dumps with the Unicode line separators written as escapes."""
    return text.translate(_LINE_BREAKS)


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps with ensure_ascii=False whose result never holds a character any reader splits lines on."""
    return one_line(json.dumps(obj, ensure_ascii=False, **kwargs))


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding one object, or {} when it is missing, unreadable, not JSON or not an object
    (for files a reader can do without: a lock's holder, a training config, another tool's metadata)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
