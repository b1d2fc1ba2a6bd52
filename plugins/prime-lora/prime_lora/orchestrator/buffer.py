"""Groups with signal that oversampling produced beyond a step's need, kept for the next steps.

Each group remembers the policy step that sampled it; a group older than the step's bound
(step - 1 - max_async_level, the same bound the weights obey) is dropped instead of trained on.
The buffer round-trips through JSON with the orchestrator's checkpoint, so a resumed run keeps it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .batching import Group


class SurplusGroups:
    def __init__(self) -> None:
        self.groups: list[Group] = []

    def add(self, group: Group) -> None:
        self.groups.append(group)

    def take(self, count: int, min_policy_step: int) -> tuple[list[Group], int]:
        """Up to `count` groups, oldest first, none sampled before `min_policy_step`; and how many were
        dropped as too old."""
        fresh = [g for g in self.groups if g.policy_step >= min_policy_step]
        stale = len(self.groups) - len(fresh)
        taken, self.groups = fresh[:count], fresh[count:]
        return taken, stale

    def state(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in dataclasses.asdict(dataclasses.replace(g, rollout_log=[])).items()
                 if k != "rollout_log"} for g in self.groups]

    def restore(self, state: list[dict[str, Any]]) -> None:
        self.groups = [Group(**saved) for saved in state]
