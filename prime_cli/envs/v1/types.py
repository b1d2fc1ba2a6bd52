"""The message types of verifiers' v1 API, as prime's own message classes (chat_messages.py: dicts that
read as attributes, so `message.content` and `message["content"]` both work), plus the content parts
tasks build multimodal prompts from and `content_text`."""

from __future__ import annotations

from typing import Any

from ..chat_messages import (
    AssistantMessage,
    AttributeDict,
    ChatMessage,
    SystemMessage,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
)

Message = ChatMessage
Messages = list[Any]
ID = str


class TextContentPart(AttributeDict):
    def __init__(self, text: str = "", **fields: Any) -> None:
        fields.pop("type", None)
        super().__init__(type="text", text=text, **fields)


class ImageUrlSource(AttributeDict):
    def __init__(self, url: str = "", **fields: Any) -> None:
        super().__init__(url=url, **fields)


class ImageUrlContentPart(AttributeDict):
    def __init__(self, image_url: Any = None, **fields: Any) -> None:
        fields.pop("type", None)
        source = image_url if isinstance(image_url, ImageUrlSource) else ImageUrlSource(**(
            {"url": image_url} if isinstance(image_url, str) else dict(image_url or {})))
        super().__init__(type="image_url", image_url=source, **fields)


ContentPart = TextContentPart | ImageUrlContentPart


def field_of(message: Any, name: str) -> Any:
    """A message's (or tool call's) field, whether it is a dict or an object (a task may build either)."""
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


def content_text(content: Any) -> str:
    """The text of a message's content: the string, or its text parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            texts.append(str(part.get("text") or ""))
        elif isinstance(part, str):
            texts.append(part)
    return "\n".join(texts)


__all__ = ["ID", "AssistantMessage", "ContentPart", "ImageUrlContentPart", "ImageUrlSource", "Message", "Messages",
           "SystemMessage", "TextContentPart", "Tool", "ToolCall", "ToolMessage", "UserMessage", "content_text", "field_of"]
