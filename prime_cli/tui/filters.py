"""Filter expressions over result rows: `reward<0.5`, `error`, `metrics.correct==1`, `text~regex`.

Terms are joined with `and` (also `&&` or `,`) and `or` (also `||`); `and` binds tighter. A term
is a flag (`error`, `truncated`, `completed`), optionally negated with `not` or `!`, or
`FIELD OP VALUE` with OP one of < <= > >= == != ~ (regex search) !~ (no match). Values may be
quoted. Text fields (text, prompt, completion, answer) need the whole row; others only the small
fields kept in memory for every row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prime_cli.tui.text import message_text

Row = Mapping[str, Any]  # a parsed row, or its small fields (prime_cli.results.row_columns.SmallRow)
Predicate = Callable[[Row], bool]

TEXT_FIELDS = {"text", "prompt", "completion", "answer"}
FLAGS = {
    "error": lambda row: bool(row.get("error")),
    "truncated": lambda row: bool(row.get("is_truncated")),
    "completed": lambda row: bool(row.get("is_completed")),
}
FIELDS_HELP = "reward, example_id, rollout_idx, task, stop, tokens, time_ms, metrics.NAME, info.NAME, text, prompt, completion, answer, error"
_TERM = re.compile(r"^(?P<field>[A-Za-z_][\w.]*)\s*(?P<op><=|>=|==|!=|!~|=|<|>|~)\s*(?P<value>.*)$", re.S)


class FilterError(ValueError):
    """A filter expression that cannot be understood; the message says what to type instead."""


@dataclass
class RowFilter:
    expression: str
    predicate: Predicate
    needs_text: bool

    def __call__(self, row: Row) -> bool:
        return self.predicate(row)


def _split(text: str, words: tuple[str, ...]) -> list[str]:
    """Split on any of `words` (matched as whole words, or as symbols) outside quotes."""
    parts, current, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        else:
            for word in words:
                end = i + len(word)
                if text[i:end].lower() != word:
                    continue
                if word.isalpha() and (text[i - 1:i].strip() or text[end:end + 1].strip()):
                    continue
                parts.append("".join(current))
                current, i = [], end
                break
            else:
                current.append(ch)
                i += 1
                continue
            continue
        current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def field_value(row: Row, name: str) -> Any:
    """The value a filter or sort key reads from a row."""
    if name in ("stop", "stop_condition"):
        return row.get("stop_condition")
    if name == "tokens":
        usage = row.get("token_usage")
        return usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    if name == "time_ms":
        timing = row.get("timing")
        return timing.get("total_ms") if isinstance(timing, Mapping) else None
    if name == "text":
        return "\n".join((message_text(row.get("prompt")), message_text(row.get("completion"))))
    if name in ("prompt", "completion"):
        return message_text(row.get(name))
    if name == "error":
        error = row.get("error")
        if isinstance(error, dict):
            return f"{error.get('type', 'Error')}: {error.get('message', '')}"
        return error
    head, _, rest = name.partition(".")
    if rest and head in ("metrics", "info", "timing", "token_usage"):
        section = row.get(head)
        return section.get(rest) if isinstance(section, Mapping) else None
    return row.get(name)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


_NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def _compare(name: str, op: str, raw_value: str) -> Predicate:
    value = _unquote(raw_value)
    if op in ("~", "!~"):
        try:
            pattern = re.compile(value, re.I)
        except re.error as exc:
            raise FilterError(f"bad regular expression {value!r} ({exc}); try escaping special characters") from None
        wanted = op == "~"

        def search(row: Row) -> bool:
            field = field_value(row, name)
            return (field is not None and bool(pattern.search(str(field)))) == wanted
        return search
    op = "==" if op == "=" else op
    target = _number(value)
    if target is None and op not in ("==", "!="):
        raise FilterError(f"{name}{op}{value}: {op} needs a number; use == or ~ to match text")
    equal = op == "=="

    def check(row: Row) -> bool:
        field = field_value(row, name)
        number = _number(field)
        if target is not None and number is not None:
            return _NUMERIC_OPS[op](number, target)
        if op in ("==", "!="):
            text = "null" if field is None else str(field)
            return (text == value) == equal
        return False
    return check


def _term(text: str) -> tuple[Predicate, bool]:
    text = text.strip()
    negate = False
    if text.lower().startswith("not "):
        negate, text = True, text[4:].strip()
    elif text.startswith("!") and not text.startswith("!="):
        negate, text = True, text[1:].strip()
    if not text:
        raise FilterError("an empty term; write e.g. reward<0.5 and error")
    flag = FLAGS.get(text.lower())
    if flag is not None:
        predicate, needs_text = flag, False
    else:
        match = _TERM.match(text)
        if not match:
            raise FilterError(f"cannot read {text!r}; write FIELD OP VALUE (e.g. reward<0.5, metrics.correct==1, text~regex) or a flag (error, truncated)")
        name, op, value = match["field"], match["op"], match["value"]
        if name.split(".")[0] not in {"reward", "example_id", "rollout_idx", "task", "stop", "stop_condition", "tokens",
                                      "time_ms", "metrics", "info", "timing", "token_usage", "error", "is_truncated",
                                      "is_completed", *TEXT_FIELDS}:
            raise FilterError(f"unknown field {name!r}; fields are {FIELDS_HELP}")
        if not value.strip():
            raise FilterError(f"{text!r} has no value after {op}")
        predicate, needs_text = _compare(name, op, value), name in TEXT_FIELDS or name.startswith("info.")
    if negate:
        inner = predicate
        return (lambda row: not inner(row)), needs_text
    return predicate, needs_text


def parse_filter(expression: str) -> RowFilter | None:
    """The filter for `expression`, or None for an empty one. Raises FilterError."""
    if not expression.strip():
        return None
    alternatives: list[list[Predicate]] = []
    needs_text = False
    for alternative in _split(expression, ("||", "or")):
        terms = []
        for part in _split(alternative, ("&&", ",", "and")):
            predicate, text = _term(part)
            terms.append(predicate)
            needs_text = needs_text or text
        alternatives.append(terms)

    def predicate(row: Row) -> bool:
        return any(all(term(row) for term in terms) for terms in alternatives)
    return RowFilter(expression.strip(), predicate, needs_text)
