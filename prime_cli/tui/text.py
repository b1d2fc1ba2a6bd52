"""Plain-text views of chat messages (content parts, tool calls) used by tables, filters and copy."""

from __future__ import annotations

import json
from typing import Any

from prime_cli.envs.messages import messages_of


def content_text(content: Any) -> str:
    """A message's content as text: strings as they are, content parts joined, images named."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text" or "text" in part:
                    parts.append(str(part.get("text", "")))
                else:
                    parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return str(content)


def tool_call_parts(call: Any) -> tuple[str, str, str]:
    """(id, function name, arguments as pretty JSON when they parse) of one tool call."""
    if not isinstance(call, dict):
        return "", "?", str(call)
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name = str(function.get("name") or "?")
    args = function.get("arguments", "")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return str(call.get("id") or ""), name, args
    return str(call.get("id") or ""), name, json.dumps(args, ensure_ascii=False, indent=2)




def message_text(value: Any) -> str:
    """All text of a prompt or completion, tool calls included, as one string."""
    lines = []
    for message in messages_of(value):
        text = content_text(message.get("content"))
        if text:
            lines.append(text)
        for call in message.get("tool_calls") or []:
            _, name, args = tool_call_parts(call)
            lines.append(f"{name}({args})")
    return "\n".join(lines)


def last_reply(completion: Any) -> str:
    """The last assistant text of a completion, on one line (for table previews)."""
    for message in reversed(messages_of(completion)):
        if message.get("role") == "assistant":
            text = content_text(message.get("content"))
            if not text and message.get("tool_calls"):
                text = " ".join(f"{tool_call_parts(c)[1]}(...)" for c in message["tool_calls"])
            return " ".join(text.split())
    return " ".join(message_text(completion).split())
