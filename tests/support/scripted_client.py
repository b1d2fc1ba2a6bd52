"""An in-process ChatClient for unit tests: replies come from a list or a function of the messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from prime_cli.envs.types import ChatResponse, Usage

Reply = Any  # str | dict (assistant message) | ChatResponse | Exception


def tool_call(name: str, arguments: Any, call_id: str = "call_0") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


class ScriptedClient:
    """Implements the envs ChatClient protocol without a network.

    `script` is a list of replies consumed in order (shared by all rollouts) or a function
    `(messages, tools, sampling_args) -> reply`. A reply is a string (assistant text), a dict (an
    assistant message, e.g. with tool_calls), a ChatResponse, or an exception instance to raise.
    """

    def __init__(self, script: list[Reply] | Callable[..., Reply], delay: float = 0.0, token_ids: bool = False):
        self.script = script
        self.delay = delay
        self.token_ids = token_ids
        self.calls: list[dict[str, Any]] = []
        self._next = 0

    def _reply(self, messages, tools, sampling_args) -> Reply:
        if callable(self.script):
            return self.script(messages, tools, sampling_args)
        reply = self.script[min(self._next, len(self.script) - 1)]
        self._next += 1
        return reply

    async def chat(self, messages, *, model, tools=None, sampling_args=None) -> ChatResponse:
        self.calls.append({"messages": [dict(m) for m in messages], "model": model, "tools": tools, "sampling_args": sampling_args})
        if self.delay:
            await asyncio.sleep(self.delay)
        reply = self._reply(messages, tools, sampling_args)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ChatResponse):
            return reply
        message = {"role": "assistant", "content": reply} if isinstance(reply, str) else dict(reply)
        message.setdefault("role", "assistant")
        text = message.get("content") or ""
        response = ChatResponse(message=message, finish_reason="tool_calls" if message.get("tool_calls") else "stop",
                                usage=Usage(prompt_tokens=sum(len(str(m.get("content") or "")) for m in messages), completion_tokens=len(text)))
        if self.token_ids:
            response.prompt_token_ids = list(range(response.usage.prompt_tokens))
            response.completion_token_ids = [ord(c) for c in text]
            response.completion_logprobs = [-0.5] * len(text)
        return response

    async def complete(self, prompt, *, model, sampling_args=None) -> ChatResponse:
        self.calls.append({"prompt": prompt, "model": model, "sampling_args": sampling_args})
        reply = self._reply(prompt, None, sampling_args)
        if isinstance(reply, BaseException):
            raise reply
        return ChatResponse(message={"role": "assistant", "content": reply}, finish_reason="stop", usage=Usage(len(prompt), len(reply)))
