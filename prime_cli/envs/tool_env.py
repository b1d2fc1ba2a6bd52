"""`ToolEnv`: the model calls Python functions through OpenAI tool calls.

Each tool call becomes a `tool` message with the function's result. A tool that raises, bad
argument JSON, or an unknown tool name become an error message to the model (it can recover),
unless the exception type is in `stop_errors`, which ends the rollout with that error. The rollout
ends when the model replies without calling a tool, or after `max_turns` model calls.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from .decorators import stop
from .errors import ToolCallError, ToolParseError
from .messages import tool_calls_of
from .multiturn_env import MultiTurnEnv
from .tool_schema import tool_name, tool_schema
from .types import Message, Messages, State


def default_error_formatter(exc: BaseException) -> str:
    return f"Error: {type(exc).__name__}: {exc}"


class ToolEnv(MultiTurnEnv):
    def __init__(
        self,
        tools: Sequence[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        error_formatter: Callable[[BaseException], str] = default_error_formatter,
        stop_errors: Sequence[type[BaseException]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.tools: list[Callable[..., Any]] = []
        self.tool_map: dict[str, Callable[..., Any]] = {}
        self.error_formatter = error_formatter
        self.stop_errors = tuple(stop_errors or ())
        super().__init__(max_turns=max_turns, **kwargs)
        self.oai_tools = list(self.oai_tools or [])
        for tool in tools or []:
            self.add_tool(tool)

    def add_tool(self, tool: Callable[..., Any], args_to_skip: Sequence[str] = ()) -> None:
        name = tool_name(tool)
        if name in self.tool_map:
            raise ValueError(f"two tools are named {name!r}; tool names must be unique")
        self.tools.append(tool)
        self.tool_map[name] = tool
        self.oai_tools.append(tool_schema(tool, args_to_skip=args_to_skip))

    def remove_tool(self, tool: Callable[..., Any]) -> None:
        name = tool_name(tool)
        self.tools = [t for t in self.tools if tool_name(t) != name]
        self.tool_map.pop(name, None)
        self.oai_tools = [s for s in self.oai_tools if s["function"]["name"] != name]

    @stop(priority=10)
    async def no_tools_called(self, state: State) -> bool:
        completion = state["completion"]
        if not completion or completion[-1].get("role") != "assistant":
            return False
        return not tool_calls_of(completion[-1])

    async def call_tool(self, tool_name: str, tool_args: dict[str, Any], tool_call_id: str, **kwargs: Any) -> Message:
        """Run one tool and wrap its result as a tool message."""
        tool = self.tool_map[tool_name]
        if inspect.iscoroutinefunction(tool):
            result = await tool(**tool_args)
        else:  # sync tools run in a thread so a slow tool does not stall other rollouts
            result = await asyncio.to_thread(tool, **tool_args)
            if inspect.isawaitable(result):
                result = await result
        return {"role": "tool", "content": str(result), "tool_call_id": tool_call_id}

    def parse_tool_call(self, call: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
        function = call.get("function") or {}
        name = function.get("name") or ""
        call_id = call.get("id") or ""
        raw = function.get("arguments")
        if isinstance(raw, dict):
            return name, raw, call_id
        try:
            args = json.loads(raw) if raw not in (None, "") else {}
        except json.JSONDecodeError as exc:
            raise ToolParseError(f"arguments of {name or 'the tool call'} are not valid JSON ({exc.msg}): {raw!r}") from None
        if not isinstance(args, dict):
            raise ToolParseError(f"arguments of {name} must be a JSON object, got {type(args).__name__}")
        return name, args, call_id

    async def run_tool_call(self, call: dict[str, Any], messages: Messages, state: State) -> Message:
        call_id = call.get("id") or ""
        try:
            name, args, call_id = self.parse_tool_call(call)
            if name not in self.tool_map:
                known = ", ".join(sorted(self.tool_map)) or "none"
                raise ToolCallError(f"unknown tool {name!r} (available: {known})")
            args = self.prepare_tool_args(name, args, messages, state)
            return await self.call_tool(name, args, call_id)
        except Exception as exc:
            if self.stop_errors and isinstance(exc, self.stop_errors):
                raise
            state.setdefault("tool_errors", []).append({"tool_call_id": call_id, "type": type(exc).__name__, "message": str(exc)})
            return {"role": "tool", "content": self.error_formatter(exc), "tool_call_id": call_id}

    def prepare_tool_args(self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State) -> dict[str, Any]:
        return tool_args

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        replies: list[Message] = []
        for call in tool_calls_of(messages[-1]):
            replies.append(await self.run_tool_call(call, messages, state))
        return replies


class StatefulToolEnv(ToolEnv):
    """A ToolEnv whose tools take hidden arguments, filled per call by `update_tool_args`.

    `add_tool(f, args_to_skip=["session_id"])` hides `session_id` from the model's schema;
    `update_tool_args(tool_name, tool_args, messages, state)` returns the arguments to call with.
    """

    def update_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State, **kwargs: Any
    ) -> dict[str, Any]:
        return tool_args

    def prepare_tool_args(self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State) -> dict[str, Any]:
        return self.update_tool_args(tool_name, dict(tool_args), messages, state)
