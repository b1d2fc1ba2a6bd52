"""`TasksetConfig` and `Taskset` of verifiers' v1 API: config in, tasks out.

`load()` returns the tasks (a list, or a generator; `INFINITE = True` for a procedural set that never
ends, which then needs `-n`). Iterating a taskset numbers the tasks (`data.idx`: their position in
`load()`) and applies the config's `system_prompt` file, when one is set, to every task.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializeAsAny

from .generic import Subscriptable, parameter
from .task import Task, TaskConfig


class TasksetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = ""
    task: SerializeAsAny[TaskConfig] = TaskConfig()
    system_prompt: Path | None = None

    @property
    def name(self) -> str:
        return self.id


SharedTasksetConfig = TasksetConfig


class Taskset(Subscriptable):
    INFINITE: ClassVar[bool] = False

    def __init__(self, config: TasksetConfig | None = None) -> None:
        self.config = config if config is not None else self.config_type()()
        override = self.config.system_prompt
        self.system_prompt = Path(override).read_text() if override is not None else None

    def load(self) -> Iterable[Task]:
        raise NotImplementedError(f"{type(self).__name__} must implement load()")

    def __iter__(self) -> Iterator[Task]:
        update: dict[str, Any] = {} if self.system_prompt is None else {"system_prompt": self.system_prompt}
        return (task.with_data(idx=idx, **update) for idx, task in enumerate(self.load()))

    def take(self, count: int) -> list[Task]:
        return list(itertools.islice(iter(self), count))

    @classmethod
    def task_type(cls) -> type[Task]:
        return parameter(cls, Task) or Task

    @classmethod
    def config_type(cls) -> type[TasksetConfig]:
        return parameter(cls, TasksetConfig) or TasksetConfig

    @classmethod
    def toolsets(cls, config: Any) -> list[Any]:
        """Tool servers shared by every rollout of the taskset, made from its config."""
        return []
