"""Parsers for models that reason in a `<think>...</think>` block before answering.

`think_spans` / `strip_think` are shared with `XMLParser`, so every parser agrees on what counts as
reasoning:

- a closed block `<think>...</think>` is reasoning; nested `<think>` tags are matched balanced, so
  the outermost pair is the block;
- an unclosed `<think>` makes everything after it reasoning (the model never finished thinking);
- a `</think>` with no `<think>` before it makes everything before it reasoning. Chat templates of
  reasoning models (Qwen3, DeepSeek-R1) often put the opening `<think>` in the prompt, so the
  completion starts inside the block.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..messages import assistant_texts, last_assistant_text
from ..types import Messages
from .parser import FormatRewardFunc, Parser, _identity, average

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_THINK_TAG = re.compile(r"<(/?)think>")


def think_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) character spans of `text` that are reasoning, in order, disjoint."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for match in _THINK_TAG.finditer(text):
        if not match.group(1):
            if depth == 0:
                start = match.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, match.end()))
        else:
            # An orphan </think>: everything before it (earlier spans included) is reasoning.
            spans = [(0, match.end())]
    if depth > 0:
        spans.append((start, len(text)))
    return spans


def remove_spans(
    text: str, spans: list[tuple[int, int]], start: int = 0, end: int | None = None
) -> str:
    """`text[start:end]` without the parts covered by `spans` (sorted, disjoint)."""
    end = len(text) if end is None else end
    pieces: list[str] = []
    pos = start
    for span_start, span_end in spans:
        if span_end <= pos or span_start >= end:
            continue
        pieces.append(text[pos : max(pos, span_start)])
        pos = max(pos, span_end)
    if pos < end:
        pieces.append(text[pos:end])
    return "".join(pieces)


def strip_think(text: str) -> str:
    """`text` without its reasoning (see the module docstring for what counts as reasoning)."""
    return remove_spans(text, think_spans(text))


class ThinkParser(Parser):
    """For models that must think first: `<think>reasoning</think> answer`.

    `parse(text)` applies `extract_fn` to the stripped text after the LAST `</think>`. A text with no
    `</think>` at all returns None: the model never finished thinking (typically truncated), and its
    half-written reasoning must not be graded as an answer.

    The format reward scores each assistant message 1.0 when it starts (after whitespace) with
    `<think>`, contains exactly one `<think>` and exactly one `</think>`, and has non-blank text after
    `</think>`; else 0.0. The score is the mean over assistant messages, 0.0 when there are none.
    """

    def __init__(self, extract_fn: Callable[[str], Any] = _identity) -> None:
        super().__init__(extract_fn=extract_fn)

    def parse(self, text: str) -> Any:
        if not text or THINK_CLOSE not in text:
            return None
        return self.extract_fn(text.rsplit(THINK_CLOSE, 1)[1].strip())

    def get_format_reward_func(self) -> FormatRewardFunc:
        def format_reward(completion: Messages, **kwargs: Any) -> float:
            return average([_think_format_score(text) for text in assistant_texts(completion)])

        return format_reward


def _think_format_score(text: str) -> float:
    if not text.lstrip().startswith(THINK_OPEN):
        return 0.0
    if text.count(THINK_OPEN) != 1 or text.count(THINK_CLOSE) != 1:
        return 0.0
    return 1.0 if text.split(THINK_CLOSE, 1)[1].strip() else 0.0


class MaybeThinkParser(Parser):
    """For models that may or may not think: drops reasoning if present, then `extract_fn`.

    Closed `<think>...</think>` blocks are removed, text after an unclosed `<think>` is dropped as
    reasoning, and text before an orphan `</think>` too; a text without think tags is used whole.
    The result is stripped of surrounding whitespace before `extract_fn` sees it. The format reward
    is 1.0 when the last assistant message has non-blank text outside its reasoning, else 0.0.
    """

    def __init__(self, extract_fn: Callable[[str], Any] = _identity) -> None:
        super().__init__(extract_fn=extract_fn)

    def parse(self, text: str) -> Any:
        return self.extract_fn(strip_think(text or "").strip())

    def get_format_reward_func(self) -> FormatRewardFunc:
        def format_reward(completion: Messages, **kwargs: Any) -> float:
            text = last_assistant_text(completion)
            return 1.0 if text is not None and strip_think(text).strip() else 0.0

        return format_reward
