"""`Trace` of verifiers' v1 API: what a rollout did, as a task's rewards, metrics and stop conditions read it.

prime builds one per rollout from its own rollout state (the messages so far, the turns, the errors) and
hands it to the task: `last_reply`, `num_turns`, `messages`, `assistant_messages`, `tool_messages`,
`transcript`, `info` (scratch space), `state` (the task's `State`), and the `rewards` / `metrics` the task
records. The rollout's reward is the weighted sum of its rewards (`trace.reward`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .state import State
from .types import content_text, field_of

TRACE_VERSION = 1


class Reward(BaseModel):
    score: float
    weight: float = 1.0

    @property
    def value(self) -> float:
        return self.score * self.weight


class Error(BaseModel):
    type: str
    message: str


class Trace:
    def __init__(self, task: Any, prompt: list[Any], state: State | None = None) -> None:
        self.task = task
        self.prompt = list(prompt)
        self.completion: list[Any] = []
        self.turns = 0  # model replies so far
        self.state = state if state is not None else State()
        self.info: dict[str, Any] = {}
        self.rewards: dict[str, Reward | None] = {}
        self.metrics: dict[str, float | None] = {}
        self.errors: list[Error] = []
        self.stop_condition: str | None = None
        self.truncated = False
        self.root_reply: str | None = None

    # -- reading --------------------------------------------------------------------------------

    @property
    def messages(self) -> list[Any]:
        return [*self.prompt, *self.completion]

    @property
    def last_message(self) -> Any:
        if not self.messages:
            raise ValueError("trace has no messages")
        return self.messages[-1]

    @property
    def num_turns(self) -> int:
        return self.turns

    @property
    def assistant_messages(self) -> list[Any]:
        """The model's replies in order (assistant messages the prompt brought are not among them)."""
        return [m for m in self.completion if field_of(m, "role") == "assistant"]

    @property
    def tool_messages(self) -> list[Any]:
        return [m for m in self.completion if field_of(m, "role") == "tool"]

    @property
    def last_reply(self) -> str:
        if self.root_reply is not None:
            return self.root_reply.strip()
        replies = self.assistant_messages
        return (content_text(field_of(replies[-1], "content")) or "").strip() if replies else ""

    @property
    def transcript(self) -> str:
        blocks = []
        for message in self.messages:
            lines = [f"[{field_of(message, 'role')}]"]
            if text := content_text(field_of(message, "content")):
                lines.append(text)
            for call in field_of(message, "tool_calls") or []:
                lines.append(f"[tool_call {field_of(call, 'name')}({field_of(call, 'arguments')})]")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    @property
    def is_truncated(self) -> bool:
        return self.truncated

    @property
    def reward(self) -> float:
        return sum(r.value for r in self.rewards.values() if r is not None)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def has_error(self) -> bool:
        return bool(self.errors)

    @property
    def last_error(self) -> Error | None:
        return self.errors[-1] if self.errors else None

    # -- writing --------------------------------------------------------------------------------

    def record_metric(self, name: str, value: float) -> None:
        self.metrics[name] = float(value)

    def record_metrics(self, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self.record_metric(name, value)

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = Reward(score=float(value), weight=float(weight))

    def stop(self, condition: str, override: bool = False) -> None:
        if self.stop_condition is None or override:
            self.stop_condition = condition
