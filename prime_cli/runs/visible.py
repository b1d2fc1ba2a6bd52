"""Untrusted text stays text: what a model, an environment or a data set wrote, made safe to print.

A prompt, a completion, a tool result or an error message may hold terminal control characters: an ESC
starts a sequence that clears the screen (`ESC [ 2 J`) or retitles the window (`ESC ] 0 ; title BEL`),
a lone CR overwrites the line, and the C1 controls (U+0080-U+009F, e.g. U+009B, a one-character CSI)
act like ESC sequences in many terminals. Rich and Textual drop some of these (BEL, CR) and pass the
rest through. Every place that shows such text (`prime eval run -v`, the summary, GEPA's lines,
`prime env info`, the TUI) passes it through `visible`, which writes each control character as the
escape Python would (`\\x1b`, `\\x07`, `\\r`, `\\x9b`), keeping newlines and tabs where the text is
shown on several lines. The result holds no control character, so applying it twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
ONE_LINE = {code: _NAMED.get(code, f"\\x{code:02x}") for code in _CONTROLS}
MULTILINE = {code: escape for code, escape in ONE_LINE.items() if code not in (0x09, 0x0A)}
# JSON text (RFC 8259 escapes only U+0000-U+001F): DEL and C1 written as \u00XX mean the same characters
_JSON = {code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0))}


def visible(text: Any, multiline: bool = False) -> str:
    """`text` (str() of it) with every control character written as a visible escape. `multiline`
    keeps newlines (a CRLF is one newline) and tabs, for text shown on several lines."""
    text = text if isinstance(text, str) else str(text)
    if multiline:
        return text.replace("\r\n", "\n").translate(MULTILINE)
    return text.translate(ONE_LINE)


def visible_data(value: Any, multiline: bool = False) -> Any:
    """`value` with `visible` applied to every string in it (dict keys too, lists, tuples); other
    values as they are."""
    if isinstance(value, str):
        return visible(value, multiline)
    if isinstance(value, Mapping):
        return {visible_data(k, multiline): visible_data(v, multiline) for k, v in value.items()}
    if isinstance(value, list):
        return [visible_data(v, multiline) for v in value]
    if isinstance(value, tuple):
        return tuple(visible_data(v, multiline) for v in value)
    return value


def json_visible(text: str) -> str:
    """JSON text (from json.dumps with ensure_ascii=False, which writes DEL and the C1 controls raw)
    with those written as \\u00XX escapes: the same JSON value, and nothing raw reaches a terminal."""
    return text.translate(_JSON)
