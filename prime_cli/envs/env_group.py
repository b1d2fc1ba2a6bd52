"""`EnvGroup`: several environments behind one, rows routed by their `task` (the child's name).

The group's dataset concatenates the children's (each row's `task` set to its child's name, ids
renumbered 0..N-1). Rollouts and scoring go to the child named by the row's task; every rollout
reports the union of all children's metrics (0.0 where its own child has no such metric), so
results of a mixed run form one table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .environment import Environment
from .errors import EnvConfigError
from .rubrics import RolloutScore, Rubric
from .types import ChatClient, SamplingArgs, State


class EnvGroupRubric(Rubric):
    def __init__(self, env_map: dict[str, Environment]) -> None:
        super().__init__()
        self.env_map = env_map

    def get_reward_func_names(self) -> list[str]:
        names: list[str] = []
        for env in self.env_map.values():
            names.extend(n for n in env.rubric.get_reward_func_names() if n not in names)
        return names

    async def compute_scores(self, states: list[State]) -> list[RolloutScore]:
        all_names = self.get_reward_func_names()
        by_task: dict[str, list[int]] = {}
        for i, state in enumerate(states):
            by_task.setdefault(state["task"], []).append(i)
        scores: list[RolloutScore | None] = [None] * len(states)
        for task, indices in by_task.items():
            env = self.env_map.get(task)
            if env is None:
                raise EnvConfigError(f"no environment named {task!r} in this group (have: {', '.join(self.env_map)})")
            child_scores = await env.rubric.compute_scores([states[i] for i in indices])
            for i, score in zip(indices, child_scores, strict=True):
                score.metrics = {name: score.metrics.get(name, 0.0) for name in all_names}
                scores[i] = score
        return [s for s in scores if s is not None]


class EnvGroup(Environment):
    def __init__(self, envs: Sequence[Environment], env_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        if not envs:
            raise EnvConfigError("EnvGroup needs at least one environment")
        names = list(env_names) if env_names is not None else [e.env_id or f"env_{i}" for i, e in enumerate(envs)]
        if len(names) != len(envs):
            raise EnvConfigError(f"EnvGroup got {len(envs)} environments but {len(names)} env_names")
        if len(set(names)) != len(names):
            raise EnvConfigError(f"EnvGroup env_names must be unique, got {names}")
        self.envs = list(envs)
        self.env_names = names
        self.env_map = dict(zip(names, envs, strict=True))
        has_train = any(e._sources["dataset"] is not None for e in envs)
        has_eval = any(e._sources["eval_dataset"] is not None for e in envs)
        super().__init__(
            dataset=(lambda: self._concat("dataset")) if has_train else None,
            eval_dataset=(lambda: self._concat("eval_dataset")) if has_eval else None,
            rubric=EnvGroupRubric(self.env_map),
            **kwargs,
        )

    def _concat(self, which: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for name, env in self.env_map.items():
            for row in (env.dataset if which == "dataset" else env.eval_dataset) or []:
                rows.append({**row, "task": name, "example_id": len(rows)})
        return rows

    def get_env_for_task(self, task: str) -> Environment:
        try:
            return self.env_map[task]
        except KeyError:
            raise EnvConfigError(f"no environment named {task!r} in this group (have: {', '.join(self.env_map)})") from None

    async def rollout(
        self, client: ChatClient, model: str, row: dict[str, Any], sampling_args: SamplingArgs | None = None
    ) -> State:
        env = self.get_env_for_task(row["task"])
        state = await env.rollout(client, model, row, self.merged_sampling_args(sampling_args))
        state["task"] = row["task"]
        return state
