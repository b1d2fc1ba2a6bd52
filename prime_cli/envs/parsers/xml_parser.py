"""XMLParser: extracts tagged fields (`<answer>...</answer>`) from a model's text."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ..errors import EnvConfigError
from ..messages import assistant_messages, assistant_texts, content_text
from ..types import Messages
from .parser import FormatRewardFunc, Parser, _identity, average
from .think_parser import remove_spans, think_spans

_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")

Span = tuple[int, int]


@dataclass(frozen=True)
class _Tag:
    start: int
    end: int
    closing: bool
    name: str


class XMLParser(Parser):
    """Parses fields written as XML-style tags, e.g. `XMLParser(["think", "answer"])`.

    A field is a tag name, or a tuple of accepted alternative names whose first is the canonical
    name: `("code", "answer")` accepts `<code>` or `<answer>` and reports the value as `.code`.

    Parsing rules of `parse(text, strip=True, last=True)`, which returns a SimpleNamespace with one
    attribute per canonical field (None when the field is absent):

    - Tags match exactly: `<name>` and `</name>`, case-sensitive, no attributes or spaces
      (`<Answer>`, `<answer >` and `<answer id="1">` are not tags).
    - A field needs its opening AND closing tag; an opening tag without its closing tag gives None
      (a truncated answer does not count). A closing tag without an opening one is ignored.
    - Tags of different names are matched independently (`<a>1</b>` gives neither a nor b).
    - Nested occurrences of the same tag are matched balanced; the value is the outermost pair's
      content, inner tags included as text.
    - A field written several times gives the LAST complete occurrence (`last=False`: the first);
      with alternatives, occurrences of all its names compete by position.
    - Unless `think` is a declared field, reasoning is invisible: tags inside `<think>...</think>`
      do not count (a draft answer in the reasoning is not the answer), an unclosed `<think>` hides
      everything after it, an orphan `</think>` everything before it, and reasoning inside a
      field's value is cut out of the value. When `think` is declared it is an ordinary field.
    - Empty or None text gives all None. `strip=True` strips whitespace around each value.

    `parse_answer(completion)` searches the assistant messages from the last one backwards and
    returns `extract_fn(value)` of `answer_field` from the first message that has it complete (an
    empty complete answer counts: it is the model's final word). If `answer_field` is an
    alternative name, only that tag counts; if it is a canonical name, any of its names does.

    The format reward scores each assistant message with the fraction of declared fields that are
    well-formed exactly once: exactly one opening and one closing tag of that name (outside
    reasoning), in that order, with non-blank content. A field with alternatives counts when any
    of its names qualifies. The reward is the mean over assistant messages; 0.0 when there are none.
    """

    def __init__(
        self,
        fields: Sequence[str | tuple[str, ...]],
        answer_field: str | None = None,
        extract_fn: Callable[[str], Any] = _identity,
    ) -> None:
        super().__init__(extract_fn=extract_fn)
        self._fields: list[tuple[str, ...]] = _validate_fields(fields)
        self.answer_field = answer_field or "answer"
        # An explicit answer_field must be declared. The default "answer" may be missing (parsers
        # that never call parse_answer, as in many ported environments): parse_answer then raises.
        self._answer_names: tuple[str, ...] | None = (
            self._resolve_answer_field(answer_field)
            if answer_field is not None
            else self._resolve_answer_field(self.answer_field, required=False)
        )
        names = [name for field in self._fields for name in field]
        self._hide_think = "think" not in names
        alternation = "|".join(re.escape(name) for name in names)
        self._tag_re = re.compile(rf"<(/?)({alternation})>")

    def get_fields(self) -> list[str]:
        """The canonical field names, in declared order."""
        return [field[0] for field in self._fields]

    # Parsing

    def parse(self, text: str, strip: bool = True, last: bool = True) -> SimpleNamespace:
        values: dict[str, str | None] = dict.fromkeys(self.get_fields())
        if not text:
            return SimpleNamespace(**values)
        tags, spans = self._scan(text)
        for field in self._fields:
            values[field[0]] = _pick(text, spans, _outer_pairs(tags, field), strip, last)
        return SimpleNamespace(**values)

    def parse_answer(self, completion: Messages) -> Any:
        if self._answer_names is None:
            self._resolve_answer_field(self.answer_field)  # raises the explanatory error
        for text in reversed(assistant_texts(completion)):
            if not text:
                continue
            tags, spans = self._scan(text)
            value = _pick(text, spans, _outer_pairs(tags, self._answer_names), True, True)
            if value is not None:
                return self.extract_fn(value)
        return None

    def _scan(self, text: str) -> tuple[list[_Tag], list[Span]]:
        """The declared-field tags outside reasoning, and the reasoning spans."""
        spans = think_spans(text) if self._hide_think else []
        tags = [
            _Tag(m.start(), m.end(), bool(m.group(1)), m.group(2))
            for m in self._tag_re.finditer(text)
            if not any(start <= m.start() < end for start, end in spans)
        ]
        return tags, spans

    # Formatting

    def format(self, **kwargs: Any) -> str:
        """The XML text for the given fields, in declared order; None values are left out.

        Keys are canonical names (or an alternative name, which is then the tag written).
        """
        index = {name: i for i, field in enumerate(self._fields) for name in field}
        chosen: dict[int, tuple[str, Any]] = {}
        for key, value in kwargs.items():
            if key not in index:
                raise EnvConfigError(
                    f"XMLParser.format got unknown field {key!r}; declared fields: {self.get_fields()}"
                )
            if index[key] in chosen:
                other = chosen[index[key]][0]
                raise EnvConfigError(
                    f"XMLParser.format got both {other!r} and {key!r}, names of the same field"
                )
            chosen[index[key]] = (key, value)
        return "\n".join(
            f"<{name}>\n{value}\n</{name}>"
            for _, (name, value) in sorted(chosen.items())
            if value is not None
        )

    def get_format_str(self) -> str:
        """A description of the expected format, for system prompts."""
        lines = ["Respond in the following format:"]
        for field in self._fields:
            lines += [f"<{field[0]}>", "...", f"</{field[0]}>"]
        for field in self._fields:
            if len(field) > 1:
                others = " or ".join(f"<{name}>" for name in field[1:])
                lines.append(f"Instead of <{field[0]}> you may use {others}.")
        return "\n".join(lines)

    # Format reward

    def get_format_reward_func(self) -> FormatRewardFunc:
        def format_reward(completion: Messages, **kwargs: Any) -> float:
            # messages that only call tools carry no text to format: they are not counted
            texts = [
                content_text(m)
                for m in assistant_messages(completion)
                if content_text(m).strip() or not m.get("tool_calls")
            ]
            return average([self._format_score(text) for text in texts])

        return format_reward

    def _format_score(self, text: str) -> float:
        if not text:
            return 0.0
        tags, spans = self._scan(text)
        good = sum(
            any(_once(text, spans, [t for t in tags if t.name == name]) for name in field)
            for field in self._fields
        )
        return good / len(self._fields)

    def _resolve_answer_field(self, answer_field: str, required: bool = True) -> tuple[str, ...] | None:
        for field in self._fields:
            if answer_field == field[0]:
                return field
            if answer_field in field:
                return (answer_field,)
        if not required:
            return None
        raise EnvConfigError(
            f"XMLParser answer_field {answer_field!r} is not a declared field "
            f"(fields: {self.get_fields()}); declare it or pass answer_field=<one of them>"
        )


def _validate_fields(fields: Any) -> list[tuple[str, ...]]:
    if isinstance(fields, (str, bytes)) or not isinstance(fields, (list, tuple)):
        raise EnvConfigError(
            f"XMLParser fields must be a list of tag names or tuples of alternative names, got {fields!r}"
        )
    if not fields:
        raise EnvConfigError("XMLParser fields is empty; declare at least one field")
    seen: set[str] = set()
    result: list[tuple[str, ...]] = []
    for field in fields:
        names = (field,) if isinstance(field, str) else field
        if not isinstance(names, (tuple, list)) or not names:
            raise EnvConfigError(
                f"XMLParser field {field!r} must be a tag name or a non-empty tuple of alternative names"
            )
        for name in names:
            if not isinstance(name, str) or not _TAG_NAME.fullmatch(name):
                raise EnvConfigError(
                    f"XMLParser field {field!r}: {name!r} is not a valid tag name (ASCII letters, "
                    "digits, '_', '-', '.'; starting with a letter or '_')"
                )
            if name in seen:
                raise EnvConfigError(f"XMLParser field {name!r} is declared more than once")
            seen.add(name)
        result.append(tuple(names))
    return result


def _outer_pairs(tags: list[_Tag], names: Sequence[str]) -> list[tuple[_Tag, _Tag]]:
    """Complete (open, close) pairs of any of `names` not nested in another, by position."""
    pairs: list[tuple[_Tag, _Tag]] = []
    for name in names:
        stack: list[_Tag] = []
        for tag in tags:
            if tag.name != name:
                continue
            if not tag.closing:
                stack.append(tag)
            elif stack:  # a closing tag with nothing open is ignored
                pairs.append((stack.pop(), tag))
    outer = [
        p
        for p in pairs
        if not any(q is not p and q[0].start <= p[0].start and p[1].end <= q[1].end for q in pairs)
    ]
    return sorted(outer, key=lambda pair: pair[0].start)


def _pick(
    text: str, spans: list[Span], pairs: list[tuple[_Tag, _Tag]], strip: bool, last: bool
) -> str | None:
    if not pairs:
        return None
    opening, closing = pairs[-1] if last else pairs[0]
    value = remove_spans(text, spans, opening.end, closing.start)
    return value.strip() if strip else value


def _once(text: str, spans: list[Span], tags: list[_Tag]) -> bool:
    """Exactly one opening then one closing tag, with non-blank content."""
    if len(tags) != 2 or tags[0].closing or not tags[1].closing:
        return False
    return bool(remove_spans(text, spans, tags[0].end, tags[1].start).strip())
