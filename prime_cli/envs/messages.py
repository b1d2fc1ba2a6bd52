"""Small helpers over chat messages, shared by parsers, rubrics and environments."""

from __future__ import annotations

from typing import Any

from .types import Message, Messages


def content_text(message: Message) -> str:
    """The text of a message's content (joins text parts of a multimodal content list)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return str(content)


def assistant_messages(completion: Messages) -> list[Message]:
    """The assistant messages of a completion (a string completion counts as one)."""
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    return [m for m in completion or [] if m.get("role") == "assistant"]


def assistant_texts(completion: Messages) -> list[str]:
    return [content_text(m) for m in assistant_messages(completion)]


def last_assistant_text(completion: Messages) -> str | None:
    """The text of the last assistant message, or None when there is none."""
    messages = assistant_messages(completion)
    return content_text(messages[-1]) if messages else None


def last_user_text(prompt: Messages) -> str:
    if isinstance(prompt, str):
        return prompt
    for message in reversed(prompt or []):
        if message.get("role") == "user":
            return content_text(message)
    return ""


def tool_calls_of(message: Message) -> list[dict[str, Any]]:
    return list(message.get("tool_calls") or [])


def messages_of(value: Any) -> list[dict[str, Any]]:
    """A saved prompt or completion as a message list (a plain string is one assistant message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    if isinstance(value, list):
        return [m if isinstance(m, dict) else {"role": "?", "content": str(m)} for m in value]
    return [{"role": "?", "content": str(value)}]
