"""RubricGroup: several rubrics scoring the same rollouts; rewards add up, metrics are merged."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from prime_cli.envs.errors import RubricError
from prime_cli.envs.types import State

from .rubric import RewardFunc, RolloutScore, Rubric


class RubricGroup(Rubric):
    def __init__(self, rubrics: Sequence[Rubric], **kwargs: Any) -> None:
        rubrics = list(rubrics)
        if not rubrics:
            raise RubricError("RubricGroup needs at least one rubric")
        for rubric in rubrics:
            if not isinstance(rubric, Rubric):
                raise RubricError(f"RubricGroup takes Rubric instances, got {type(rubric).__name__}")
        if "funcs" in kwargs or "weights" in kwargs:
            raise RubricError("RubricGroup has no functions of its own; put them in a child rubric")
        self.rubrics = rubrics
        kwargs.setdefault("parser", rubrics[0].parser)
        super().__init__(**kwargs)

    def add_reward_func(self, func: RewardFunc, weight: float = 1.0) -> None:
        """Adds to the first child rubric."""
        self.rubrics[0].add_reward_func(func, weight)

    def add_metric(self, func: RewardFunc, weight: float = 0.0) -> None:
        self.rubrics[0].add_metric(func, weight)

    def add_class_object(self, name: str, obj: Any) -> None:
        """Registers the object in the group and in every child rubric."""
        super().add_class_object(name, obj)
        for rubric in self.rubrics:
            rubric.add_class_object(name, obj)

    def get_reward_func_names(self) -> list[str]:
        names: list[str] = []
        for rubric in self.rubrics:
            names.extend(n for n in rubric.get_reward_func_names() if n not in names)
        return names

    def get_reward_funcs(self) -> list[RewardFunc]:
        return [f for rubric in self.rubrics for f in rubric.get_reward_funcs()]

    def get_reward_weights(self) -> list[float]:
        return [w for rubric in self.rubrics for w in rubric.get_reward_weights()]

    async def compute_scores(self, states: list[State]) -> list[RolloutScore]:
        states = list(states)
        per_child = await asyncio.gather(*(r.compute_scores(states) for r in self.rubrics))
        return [merge_scores([child[j] for child in per_child]) for j in range(len(states))]


def merge_scores(scores: Sequence[RolloutScore]) -> RolloutScore:
    """Sum rewards, merge metrics (a name in several scores is summed), concatenate errors."""
    merged = RolloutScore()
    for score in scores:
        merged.reward += score.reward
        for name, value in score.metrics.items():
            merged.metrics[name] = merged.metrics.get(name, 0.0) + value
        merged.errors.extend(score.errors)
    return merged
