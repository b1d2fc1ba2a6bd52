"""Chat messages and tool calls that are OpenAI-style dicts and read as objects too.

verifiers (0.1.10 and later) hands environments message objects (`m.content`, `m.role`,
`m.tool_calls`, `call.name`, `call.arguments`) that also answer `m["content"]`; older environments
use dict access only (`call["function"]["name"]`). A `ChatMessage` is a dict, so it saves to JSON, compares
equal to a plain dict and keeps OpenAI's nesting, and it answers both ways. The rollout loop makes
every message it records one (`as_chat_message`), so a reward function written either way works.
"""

from __future__ import annotations

import json
from typing import Any

# fields a message of some role may lack: read as None, as a verifiers message object gives them
OPTIONAL_FIELDS = frozenset({"content", "tool_calls", "tool_call_id", "reasoning_content", "name",
                             "thinking_blocks", "finish_reason", "is_truncated", "tokens"})


class AttributeDict(dict):
    """A dict whose keys read (and write) as attributes; `model_dump()` gives plain dicts back."""

    _optional: frozenset[str] = frozenset()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            if name in self._optional:
                return None
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def model_dump(self, exclude_none: bool = False, **_: Any) -> dict[str, Any]:
        return plain(self, exclude_none)

    def model_copy(self, update: dict[str, Any] | None = None, deep: bool = False) -> AttributeDict:
        import copy  # lazy: already loaded

        clone = copy.deepcopy(self) if deep else type(self).__new__(type(self))
        if not deep:
            dict.update(clone, self)
        dict.update(clone, update or {})
        return clone


class DerivedKeysDict(AttributeDict):
    """An AttributeDict some of whose keys are derived in `__missing__` (not stored); `get` answers them too,
    as dict.get does not call `__missing__`."""

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


class ToolCall(DerivedKeysDict):
    """One tool call as OpenAI nests it ({"id", "type": "function", "function": {"name", "arguments"}}),
    with verifiers' flat reads: `call.name`, `call.arguments` (the JSON string), `call["name"]`.

    Built from either shape: `ToolCall(id=..., name=..., arguments=...)` or an OpenAI dict."""

    def __init__(self, *args: Any, **fields: Any) -> None:
        data = dict(*args, **fields)
        if "function" not in data and "name" in data:
            arguments = data.pop("arguments", "{}")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            data = {"id": data.pop("id", ""), "type": data.pop("type", "function"),
                    "function": {"name": data.pop("name"), "arguments": arguments}, **data}
        function = data.get("function")
        if isinstance(function, dict) and not isinstance(function, AttributeDict):
            data["function"] = AttributeDict(function)
        super().__init__(data)

    def __missing__(self, key: str) -> Any:
        function = dict.get(self, "function")
        if key in ("name", "arguments") and isinstance(function, dict) and key in function:
            return function[key]
        raise KeyError(key)


class ChatMessage(AttributeDict):
    """One chat message: {"role", "content", optional "tool_calls" / "tool_call_id" ...}."""

    _optional = OPTIONAL_FIELDS

    def __init__(self, *args: Any, **fields: Any) -> None:
        super().__init__(*args, **fields)
        calls = dict.get(self, "tool_calls")
        if isinstance(calls, list):
            dict.__setitem__(self, "tool_calls", [as_tool_call(c) for c in calls])


class _RoleMessage(ChatMessage):
    role_name = ""

    def __init__(self, content: Any = None, **fields: Any) -> None:
        fields.pop("role", None)
        super().__init__(role=self.role_name, content=content, **fields)


class SystemMessage(_RoleMessage):
    role_name = "system"


class UserMessage(_RoleMessage):
    role_name = "user"


class AssistantMessage(_RoleMessage):
    role_name = "assistant"


class ToolMessage(ChatMessage):
    def __init__(self, content: Any = None, tool_call_id: str = "", **fields: Any) -> None:
        fields.pop("role", None)
        super().__init__(role="tool", content=content, tool_call_id=tool_call_id, **fields)


class Tool(AttributeDict):
    """A tool definition as verifiers writes it (name, description, JSON-schema parameters, strict);
    `openai_tool(tool)` gives the OpenAI `{"type": "function", "function": ...}` form models are sent."""

    _optional = frozenset({"strict", "description"})

    def __init__(self, *args: Any, **fields: Any) -> None:
        data = dict(*args, **fields)
        if data.get("type") == "function" and isinstance(data.get("function"), dict):
            data = dict(data["function"])
        data.setdefault("description", "")
        data.setdefault("parameters", {"type": "object", "properties": {}})
        super().__init__(data)


def openai_tool(tool: Any) -> dict[str, Any]:
    """An OpenAI tool definition from a `Tool`, a flat {"name", ...} dict or an OpenAI one (kept)."""
    if isinstance(tool, dict) and tool.get("type") == "function" and "function" in tool:
        return plain(tool)
    if hasattr(tool, "model_dump") and not isinstance(tool, dict):
        tool = tool.model_dump()
    data = plain(tool)
    function = {k: v for k, v in data.items() if v is not None and k in ("name", "description", "parameters", "strict")}
    return {"type": "function", "function": function}


def as_tool_call(call: Any) -> Any:
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, dict):
        return ToolCall(call)
    if hasattr(call, "model_dump"):  # an SDK or verifiers object
        return ToolCall(call.model_dump())
    return call


def as_chat_message(message: Any) -> Any:
    """A message as a `ChatMessage` (dicts and objects with `model_dump`); other values unchanged."""
    if isinstance(message, ChatMessage):
        return message
    if isinstance(message, dict):
        return ChatMessage(message)
    if hasattr(message, "model_dump"):
        return ChatMessage(message.model_dump(exclude_none=True))
    return message


def as_chat_messages(messages: Any) -> Any:
    """A message list with every message a `ChatMessage`; a string (completion-style) unchanged."""
    if isinstance(messages, list):
        return [as_chat_message(m) for m in messages]
    return messages


def plain(value: Any, exclude_none: bool = False) -> Any:
    """The same data as builtin dicts and lists (what json, pydantic and SDKs expect)."""
    if isinstance(value, dict):
        return {k: plain(v, exclude_none) for k, v in dict.items(value) if not (exclude_none and v is None)}
    if isinstance(value, list):
        return [plain(v, exclude_none) for v in value]
    return value
