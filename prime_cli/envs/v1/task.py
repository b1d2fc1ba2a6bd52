"""`TaskData`, `TaskConfig` and `Task` of verifiers' v1 API.

`TaskData` is one row: an immutable pydantic model (prompt, system prompt, container image, timeouts,
resources, ...) plus the taskset's own fields (e.g. `answer`). A `Task` is the behaviour for one row: its
`@vf.reward` / `@vf.metric` / `@vf.stop` methods read the rollout's `Trace`. Its `key` (stable identity)
and `hash` (content) are recorded on every result row; both are the SHA-256 of the row's JSON with sorted
keys, as verifiers computes them, so a key is the same in prime's results as in verifiers' traces.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ..multiturn_env import maybe_await
from .decorators import call_with, marked
from .generic import Subscriptable, parameter
from .state import State
from .types import content_text, field_of


class TaskResources(BaseModel):
    model_config = ConfigDict(frozen=True)

    cpu: float | None = None
    memory: float | None = None  # GB
    gpu: str | None = None
    disk: float | None = None  # GB


class TaskTimeout(BaseModel):
    """Per-stage time limits, in seconds."""

    model_config = ConfigDict(frozen=True)

    setup: float | None = None
    agent: float | None = None
    finalize: float | None = None
    scoring: float | None = None


class TaskData(BaseModel):
    model_config = ConfigDict(frozen=True)

    idx: int | None = None
    id: str | None = None
    name: str | None = None
    description: str | None = None
    prompt: str | list[Any] | None = None
    system_prompt: str | None = None
    image: str | None = None
    workdir: str | None = None
    agent_user: str | None = None
    skills: list[Any] = Field(default_factory=list)
    network_allow: list[str] = Field(default_factory=lambda: ["*"])
    network_block: list[str] = Field(default_factory=list)
    artifacts: list[Any] = Field(default_factory=list)
    artifact_max_bytes: int = Field(32 * 1024 * 1024, gt=0)  # verifiers' default: part of every task hash
    timeout: TaskTimeout = TaskTimeout()
    resources: TaskResources = TaskResources()

    @property
    def prompt_text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        return "\n\n".join(t for m in self.prompt or [] if (t := content_text(field_of(m, "content"))))


class WireTaskData(TaskData):
    model_config = ConfigDict(extra="allow")


class TaskConfig(BaseModel):
    """Run-time knobs read by a task's behaviour (every field needs a default)."""

    model_config = ConfigDict(extra="forbid")

    judges: list[Any] = Field(default_factory=list)
    stops: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    rewards: dict[str, Any] = Field(default_factory=dict)


def content_key(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class Task(Subscriptable):
    NEEDS_CONTAINER: ClassVar[bool] = False

    def __init__(self, data: TaskData, config: TaskConfig | None = None) -> None:
        self.data = data
        self.config = config if config is not None else self.config_type()()

    @classmethod
    def data_type(cls) -> type[TaskData]:
        return parameter(cls, TaskData) or TaskData

    @classmethod
    def config_type(cls) -> type[TaskConfig]:
        return parameter(cls, TaskConfig) or TaskConfig

    @classmethod
    def state_type(cls) -> type[State]:
        return parameter(cls, State) or State

    @classmethod
    def toolsets(cls, config: Any) -> list[Any]:
        """Tool servers of each rollout of this task, made from its config."""
        return []

    @property
    def hash(self) -> str:
        return content_key(self.data.model_dump(mode="json", exclude_none=True))

    @property
    def key(self) -> str:
        return self.hash

    def with_data(self, **update: Any) -> Task:
        clone = copy.copy(self)
        clone.data = self.data.model_copy(update=update)
        return clone

    def with_system_prompt(self, system_prompt: str) -> Task:
        return self.with_data(system_prompt=system_prompt)

    async def setup(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def finalize(self, *args: Any, **kwargs: Any) -> None:
        return None

    def hooks(self, kind: str) -> list[Callable[..., Any]]:
        return marked(self, kind)

    async def score(self, trace: Any, runtime: Any = None, errors: list[dict[str, Any]] | None = None) -> None:
        """Runs the metrics, then the rewards, recording them on `trace` (a dict result records each key). With
        `errors`, a function that raises is appended there ({func, type, message, weight}) and the others still
        run; without, the first one raising stops scoring."""
        available = {"task": self.data, "trace": trace, **({"runtime": runtime} if runtime is not None else {})}
        for kind in ("metric", "reward"):
            for fn in self.hooks(kind):
                weight = getattr(fn, "weight", 1.0) if kind == "reward" else 0.0
                try:
                    value = await maybe_await(call_with(fn, available))
                except Exception as exc:
                    if errors is None:
                        raise
                    errors.append({"func": fn.__name__, "type": type(exc).__name__, "message": str(exc), "weight": weight})
                    continue
                if kind == "metric":
                    _record(trace.record_metric, fn.__name__, value)
                else:
                    _record(lambda name, v, w=weight: trace.record_reward(name, v, w), fn.__name__, value)


def _record(record: Callable[[str, float], None], name: str, value: Any) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            record(str(key), float(item))
    else:
        record(name, float(value))
