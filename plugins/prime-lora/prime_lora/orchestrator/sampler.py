"""Which example comes next: environments picked by ratio, each walked in a shuffled order per epoch.

All randomness comes from one `random.Random`, whose state (and the cursors) round-trip through
JSON, so a resumed run draws exactly the rows an uninterrupted run would have drawn.

Examples marked easy or hard (orchestrator.buffer thresholds, prime-rl's pools) are skipped; a later
group of the same example (one already in flight) marks it again, so the mark follows the newest result.
"""

from __future__ import annotations

import random
import sys
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
    retired: dict[str, str] = field(default_factory=dict)  # str(example_id) -> "easy" | "hard"


class EnvSampler:
    def __init__(self, envs: list[EnvRows], seed: int):
        if any(not e.rows for e in envs):
            empty = next(e.name for e in envs if not e.rows)
            raise ValueError(f"environment {empty} has no training rows")
        self.envs = envs
        self.rng = random.Random(seed)
        self.warned: set[str] = set()

    def next(self) -> tuple[EnvRows, dict[str, Any]]:
        """The next (environment, row), skipping retired examples while any other is left."""
        entry = self.rng.choices(self.envs, weights=[e.ratio for e in self.envs])[0] if len(self.envs) > 1 else self.envs[0]
        if len(entry.retired) >= len(entry.rows) and entry.name not in self.warned:
            self.warned.add(entry.name)
            print(f"warning: every example of {entry.name} is marked easy or hard (orchestrator.buffer thresholds); "
                  "drawing them again", file=sys.stderr, flush=True)
        for _ in range(2 * len(entry.rows) + 1):
            row = self._draw(entry)
            if str(row.get("example_id")) not in entry.retired or len(entry.retired) >= len(entry.rows):
                return entry, row
        return entry, row

    def _draw(self, entry: EnvRows) -> dict[str, Any]:
        if entry.cursor >= len(entry.order):
            entry.order = list(range(len(entry.rows)))
            self.rng.shuffle(entry.order)
            entry.cursor = 0
            entry.epoch += 1
        row = entry.rows[entry.order[entry.cursor]]
        entry.cursor += 1
        return row

    def mark(self, env_name: str, example_id: Any, pool: str) -> None:
        """Record an example's pool after a group of it was scored ("normal" puts it back)."""
        entry = next(e for e in self.envs if e.name == env_name)
        if pool == "normal":
            entry.retired.pop(str(example_id), None)
        else:
            entry.retired[str(example_id)] = pool

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss],
                "envs": {e.name: {"order": e.order, "cursor": e.cursor, "epoch": e.epoch, "retired": e.retired}
                         for e in self.envs}}

    def restore(self, state: dict[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        for entry in self.envs:
            saved = state["envs"].get(entry.name)
            if saved:
                entry.order, entry.cursor, entry.epoch = list(saved["order"]), saved["cursor"], saved["epoch"]
                entry.retired = dict(saved.get("retired", {}))
