"""The base parser: turns a model's completion into the value a reward function compares.

A parser does two jobs for a rubric: `parse_answer(completion)` extracts the answer, and
`get_format_reward_func()` returns a reward function that scores how well the model followed the
expected output format. Subclasses change `parse` (what is extracted from one text) and the format
reward; `parse_answer` always looks at assistant messages only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import EnvConfigError
from ..messages import assistant_messages, content_text, last_assistant_text
from ..types import Message, Messages

FormatRewardFunc = Callable[..., float]


def _identity(text: str) -> Any:
    return text


class Parser:
    """Extracts answers from completions with `extract_fn` (identity by default).

    `parse(text)` applies `extract_fn` to one text. `parse_answer(completion)` applies `parse` to
    the last assistant message's text, and returns None when the completion has no assistant
    message (a string completion counts as one assistant message).
    """

    def __init__(self, extract_fn: Callable[[str], Any] = _identity) -> None:
        if not callable(extract_fn):
            raise EnvConfigError(f"Parser extract_fn must be callable, got {extract_fn!r}")
        self.extract_fn = extract_fn

    def parse(self, text: str) -> Any:
        """Extract a value from one text: `extract_fn(text)`."""
        return self.extract_fn(text)

    def parse_answer(self, completion: Messages) -> Any:
        """The parsed last assistant message, or None when there is no assistant message."""
        text = last_assistant_text(completion)
        if text is None:
            return None
        return self.parse(text)

    def get_format_reward_func(self) -> FormatRewardFunc:
        """A reward function: 1.0 when the last assistant message has non-blank text, else 0.0."""

        def format_reward(completion: Messages, **kwargs: Any) -> float:
            text = last_assistant_text(completion)
            return 1.0 if text is not None and text.strip() else 0.0

        return format_reward

    # Thin helpers over the message list, kept for verifiers-style environments.

    def get_assistant_messages(self, completion: Messages) -> list[Message]:
        return assistant_messages(completion)

    def get_assistant_texts(self, completion: Messages) -> list[str]:
        return [content_text(m) for m in assistant_messages(completion)]

    def get_last_assistant_text(self, completion: Messages) -> str | None:
        return last_assistant_text(completion)

    def get_user_messages(self, messages: Messages) -> list[Message]:
        return _with_role(messages, "user")

    def get_system_messages(self, messages: Messages) -> list[Message]:
        return _with_role(messages, "system")

    def get_tool_messages(self, messages: Messages) -> list[Message]:
        return _with_role(messages, "tool")


def _with_role(messages: Messages, role: str) -> list[Message]:
    if isinstance(messages, str):
        return []
    return [m for m in messages or [] if m.get("role") == role]


def average(scores: list[float]) -> float:
    """Mean of per-message scores; 0.0 for no messages (nothing to reward)."""
    return sum(scores) / len(scores) if scores else 0.0
