"""`Toolset`, `ToolsetConfig` and `SharedToolsetConfig` of verifiers' v1 API, run in prime's own process.

A toolset's `@vf.tool` methods are offered to the model as OpenAI function tools named
`<TOOL_PREFIX>_<method>` (verifiers serves each toolset as an MCP server; prime's agent loop calls the
methods directly, so no server process or port is needed). `self.state` is the rollout's own instance of
the toolset's `State` type even when one toolset serves every rollout of a taskset (`Taskset.toolsets`):
it lives in a context variable that each rollout sets up (`rollout_scope`), so concurrent rollouts never
see each other's state.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..multiturn_env import maybe_await
from ..tool_schema import tool_schema
from .decorators import marked
from .generic import Subscriptable, parameter
from .state import State

_ROLLOUT_STATES: contextvars.ContextVar[dict[int, State] | None] = contextvars.ContextVar("prime_v1_toolset_states",
                                                                                         default=None)


class ToolsetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SharedToolsetConfig(ToolsetConfig):
    """The config of a toolset one instance of which serves every rollout."""


def rollout_scope() -> None:
    """Give the running rollout (its asyncio task) its own toolset states."""
    _ROLLOUT_STATES.set({})


class Toolset(Subscriptable):
    TOOL_PREFIX: ClassVar[str] = ""

    def __init__(self, config: ToolsetConfig | None = None) -> None:
        self.config = config if config is not None else self.config_type()()
        self._ready = False

    @classmethod
    def config_type(cls) -> type[ToolsetConfig]:
        return parameter(cls, ToolsetConfig) or ToolsetConfig

    @classmethod
    def state_type(cls) -> type[State]:
        return parameter(cls, State) or State

    @classmethod
    def run(cls) -> None:
        raise SystemExit(f"{cls.__name__}: prime calls a toolset's tools in its own process; there is no server to run")

    @property
    def state(self) -> State:
        states = _ROLLOUT_STATES.get()
        if states is None:
            raise RuntimeError("a toolset's state is read inside a rollout only")
        if id(self) not in states:
            states[id(self)] = self.state_type()()
        return states[id(self)]

    async def setup(self) -> None:
        return None

    async def ensure_setup(self) -> None:
        if not self._ready:
            await maybe_await(self.setup())
            self._ready = True

    def tools(self) -> dict[str, Callable[..., Any]]:
        """The model-facing name of each tool, and its bound method."""
        prefix = f"{self.TOOL_PREFIX}_" if self.TOOL_PREFIX else ""
        return {prefix + (getattr(m, "tool_name", None) or m.__name__): m for m in marked(self, "tool")}


def tool_definitions(toolsets: list[Toolset]) -> tuple[list[dict[str, Any]], dict[str, Callable[..., Any]]]:
    """The OpenAI tool definitions of every toolset's tools, and each name's method."""
    defs, methods = [], {}
    for toolset in toolsets:
        for name, method in toolset.tools().items():
            schema = tool_schema(method)
            schema["function"]["name"] = name
            defs.append(schema)
            methods[name] = method
    return defs, methods


async def call_tool(method: Callable[..., Any], arguments: str) -> str:
    args = json.loads(arguments or "{}")
    if not isinstance(args, dict):
        raise ValueError(f"tool arguments must be a JSON object, got {type(args).__name__}")
    result = await maybe_await(method(**args))
    return result if isinstance(result, str) else json.dumps(result, default=str)
