"""`SingleAgentEnv` of verifiers' v1 API: an environment whose `run(task, agents)` drives the conversation
(a scripted user that reveals one turn at a time, as alphabet_sort and color_codeword do).

`run` opens `agents.agent.interaction(task)` and calls `turn(message)`: the message (a string or
messages) is the next user turn, the model answers (calling tools until it replies without one), and the
`Segment` of what it said comes back. A prompted task speaks first: its opening reply is a bare
`turn()`. Once a `@vf.stop` of the task or the turn cap ends the exchange, the next `turn` returns a
`terminated` segment and consumes nothing. Environments with several agent seats (`Env`, `Agents` of
many, `Episode`) are not run by prime yet.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from .types import UserMessage, content_text

if TYPE_CHECKING:
    from .taskset_env import TasksetEnvironment


class SingleAgentEnvConfig(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass
class Segment:
    messages: list[Any] = field(default_factory=list)
    terminated: bool = False
    root_reply: str | None = None

    @property
    def last_reply(self) -> str:
        if self.root_reply is not None:
            return self.root_reply.strip()
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return content_text(message.get("content")).strip()
        return ""


class Interaction:
    """One agent's exchange within a rollout (the module's docstring)."""

    def __init__(self, env: TasksetEnvironment, state: dict[str, Any], call: Any) -> None:
        self.env, self.state, self._call = env, state, call
        self._started = False
        self.over = False

    @property
    def trace(self) -> Any:
        return self.env.sync_trace(self.state)

    async def turn(self, message: str | list[Any] | None = None) -> Segment:
        if self.over:
            return Segment(terminated=True)
        prompted = bool(self.state["prompt"]) and not self._started and self.state["v1_task"].data.prompt is not None
        if message is None and not prompted:
            raise ValueError("nothing to run a turn on: a bare turn() takes a prompted task's opening reply; this "
                             "exchange takes its next user message")
        if message is not None and prompted:
            raise ValueError("the task's prompt opens this exchange: take its first reply with a bare turn() first")
        if message is not None:
            turn = [UserMessage(message)] if isinstance(message, str) else [dict(m) for m in message]
            (self.state["completion"] if self._started or self.state["completion"] else self.state["prompt"]).extend(turn)
        self._started = True
        before = len(self.state["completion"])
        if await self.env.exchange_over(self.state):
            self.over = True
            return Segment(terminated=True)
        self.over = await self._call(self.state)
        return Segment(messages=list(self.state["completion"][before:]))


class Agent:
    def __init__(self, env: TasksetEnvironment, state: dict[str, Any], call: Any) -> None:
        self.env, self.state, self._call = env, state, call

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any = None) -> AsyncIterator[Interaction]:
        yield Interaction(self.env, self.state, self._call)

    async def run(self, task: Any = None) -> None:
        async with self.interaction(task) as interaction:
            await interaction.turn()


class Agents:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def __getitem__(self, name: str) -> Agent:
        if name != "agent":
            raise KeyError(f"prime runs one agent seat ('agent'), not {name!r}")
        return self.agent


class SingleAgentEnv:
    def __init__(self, config: SingleAgentEnvConfig | None = None) -> None:
        self.config = config if config is not None else SingleAgentEnvConfig()

    async def run(self, task: Any, agents: Agents) -> None:
        await agents.agent.run(task)
