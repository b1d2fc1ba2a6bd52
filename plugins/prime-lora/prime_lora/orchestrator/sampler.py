"""Which example comes next: environments picked by ratio, each walked in a shuffled order per epoch.

All randomness comes from one `random.Random`, whose state (and the cursors) round-trip through
JSON, so a resumed run draws exactly the rows an uninterrupted run would have drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EnvRows:
    name: str
    env: Any
    rows: list[dict[str, Any]]
    ratio: float
    order: list[int] = field(default_factory=list)
    cursor: int = 0
    epoch: int = 0


class EnvSampler:
    def __init__(self, envs: list[EnvRows], seed: int):
        if any(not e.rows for e in envs):
            empty = next(e.name for e in envs if not e.rows)
            raise ValueError(f"environment {empty} has no training rows")
        self.envs = envs
        self.rng = random.Random(seed)

    def next(self) -> tuple[EnvRows, dict[str, Any]]:
        """The next (environment, row)."""
        entry = self.rng.choices(self.envs, weights=[e.ratio for e in self.envs])[0] if len(self.envs) > 1 else self.envs[0]
        if entry.cursor >= len(entry.order):
            entry.order = list(range(len(entry.rows)))
            self.rng.shuffle(entry.order)
            entry.cursor = 0
            entry.epoch += 1
        row = entry.rows[entry.order[entry.cursor]]
        entry.cursor += 1
        return entry, row

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss],
                "envs": {e.name: {"order": e.order, "cursor": e.cursor, "epoch": e.epoch} for e in self.envs}}

    def restore(self, state: dict[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        for entry in self.envs:
            saved = state["envs"].get(entry.name)
            if saved:
                entry.order, entry.cursor, entry.epoch = list(saved["order"]), saved["cursor"], saved["epoch"]
