"""One SFT data row -> one conversation: the OpenAI chat fine-tuning row (`messages`, optional `tools`), a
`prompt`/`completion` row (each a string or a message list), or a saved eval run's rollout (its prompt, which
holds the environment's system prompt, then its completion). Only what a row completes is trained: assistant
turns inside a prompt (few-shot examples) get weight 0, as OpenAI's rows mark context. A row that cannot be one
raises `RowProblem`
with the reason the data line counts it under ("no assistant turn", "missing column messages", ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

UNREADABLE = "an unreadable JSON line"
# the message keys a chat template reads, and `weight` (OpenAI's: an assistant turn of weight 0 is context, not
# trained); anything else a row carries (ids, timestamps) is left out
MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "weight")


@dataclass
class Conversation:
    """Chat messages to fine-tune on (the loss on the assistant turns), with the tools they may call."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    origin: str  # where it came from, for messages: "train.jsonl row 12", "<run> example 3 rollout 1"


@dataclass
class SourceRows:
    """What one [[data.source]] gave: its conversations, and the rows left out counted by reason."""

    conversations: list[Conversation]
    bad: dict[str, int] = field(default_factory=dict)  # reason -> rows
    description: str = ""  # what was read: "train.jsonl (messages)", "2 eval runs of reverse-text in X, ..."


class RowProblem(Exception):
    """Why a row is not a conversation: the reason it is counted under."""

    @property
    def reason(self) -> str:
        return str(self)


def _text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a content list (None: not text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        if any(p.get("type") not in ("text", None) for p in content):
            raise RowProblem("a message with non-text content")
        return "".join(str(p.get("text") or "") for p in content)
    return None


def _tool_calls(calls: Any) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise RowProblem("tool_calls that are not a list")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RowProblem("a tool call without a function name")
        out.append({**{k: v for k, v in call.items() if v is not None},
                    "function": {"name": function["name"], "arguments": _arguments(function.get("arguments"))}})
    return out


def _arguments(arguments: Any) -> Any:
    """A tool call's arguments as a dict when the OpenAI format's JSON string holds an object, as vLLM hands them to
    the chat template: a template writing `arguments | tojson` would otherwise encode the string a second time."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return arguments


def message(raw: Any) -> dict[str, Any]:
    """One chat message, keeping the keys a chat template reads; None values (a Parquet struct's absent
    fields) dropped. An assistant message may have tool calls and no content."""
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str) or not raw["role"]:
        raise RowProblem("a message without role or content")
    out = {key: raw[key] for key in MESSAGE_KEYS if raw.get(key) is not None}
    if "weight" in out and out["role"] != "assistant":
        del out["weight"]  # OpenAI's key trains or skips an assistant turn; other turns are never trained
    elif "weight" in out and (out["weight"] not in (0, 1) or isinstance(out["weight"], bool)):
        raise RowProblem("a weight other than 0 or 1 on an assistant message")
    if out.get("tool_calls") == []:
        del out["tool_calls"]
    if "tool_calls" in out:
        if out["role"] != "assistant":
            raise RowProblem("tool calls in a message that is not the assistant's")
        out["tool_calls"] = _tool_calls(out["tool_calls"])
    text = _text(raw.get("content"))
    if text is None:
        if raw.get("content") is not None or "tool_calls" not in out:
            raise RowProblem("a message without role or content")
        text = ""
    out["content"] = text
    return out


def messages(value: Any, column: str) -> list[dict[str, Any]]:
    if isinstance(value, str):  # a JSON-encoded column (some datasets store the list as text)
        try:
            value = json.loads(value)
        except ValueError:
            raise RowProblem(f"{column} is not a list of messages") from None
    if not isinstance(value, list):
        raise RowProblem(f"{column} is not a list of messages")
    return [message(m) for m in value]


def tools_of(value: Any) -> list[dict[str, Any]] | None:
    """The row's `tools` column (OpenAI tool schemas; a JSON string is read); None when empty."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            raise RowProblem("tools that are not a list of tool schemas") from None
    if value is None or value == []:
        return None
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise RowProblem("tools that are not a list of tool schemas")
    return value


def _turns(value: Any, column: str, role: str) -> list[dict[str, Any]]:
    """A prompt or completion: a string is one message of `role`, else a list of messages."""
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return messages(value, column)


def _context(prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A prompt's assistant turns (few-shot examples) are context: weight 0, only the completion is trained."""
    return [{**m, "weight": 0} if m["role"] == "assistant" else m for m in prompt]


def trained(message_: dict[str, Any]) -> bool:
    """An assistant turn the loss is taken on (not one of weight 0)."""
    return message_.get("role") == "assistant" and message_.get("weight", 1) != 0


def conversation(messages_: list[dict[str, Any]], tools: list[dict[str, Any]] | None, origin: str) -> Conversation:
    if not any(trained(m) for m in messages_):
        raise RowProblem("no assistant turn" if not any(m["role"] == "assistant" for m in messages_)
                         else "no assistant turn of weight 1")
    return Conversation(messages=messages_, tools=tools, origin=origin)


def data_row(row: dict[str, Any], origin: str) -> Conversation:
    """A data set row: `messages` (+ `tools`), else `prompt` + `completion`."""
    tools = tools_of(row.get("tools"))
    if row.get("messages") is not None:
        return conversation(messages(row["messages"], "messages"), tools, origin)
    has_prompt, has_completion = row.get("prompt") is not None, row.get("completion") is not None
    if not has_prompt and not has_completion:
        raise RowProblem("missing column messages")
    if not has_completion:
        raise RowProblem("missing column completion")
    prompt = _context(_turns(row["prompt"], "prompt", "user")) if has_prompt else []
    return conversation(prompt + _turns(row["completion"], "completion", "assistant"), tools, origin)


def rollout_row(row: dict[str, Any], tools: list[dict[str, Any]] | None, origin: str) -> Conversation:
    """A saved eval run's rollout: its prompt (with the environment's system prompt) and its completion. A truncated
    rollout (cut at max_tokens or the context) is not an answer: trained, it would teach stopping mid-way."""
    if row.get("is_truncated"):
        raise RowProblem("truncated rollout")
    if row.get("prompt") is None:
        raise RowProblem("missing column prompt")
    if row.get("completion") is None:
        raise RowProblem("missing column completion")
    return conversation(_context(_turns(row["prompt"], "prompt", "user"))
                        + _turns(row["completion"], "completion", "assistant"), tools, origin)
