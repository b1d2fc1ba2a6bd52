"""The order an SFT run trains its rows in: each step's batch takes every source's share (by `ratio`) from that
source's order, a new seeded shuffle each epoch (when `shuffle`). Each source's (epoch, cursor) is the whole
state, so a resumed run draws exactly the batches a straight run would.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from prime_cli.train.plugin_api import TrainingSample


@dataclass
class SourceSamples:
    name: str  # the source as the config names it
    samples: list[TrainingSample]
    ratio: float


def shares(batch_size: int, ratios: list[float]) -> list[int]:
    """batch_size split in proportion to ratios (largest remainders; ties to the earlier source)."""
    total = sum(ratios)
    exact = [batch_size * r / total for r in ratios]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(ratios)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: batch_size - sum(counts)]:
        counts[i] += 1
    return counts


class SftBatches:
    def __init__(self, sources: list[SourceSamples], batch_size: int, seed: int, shuffle: bool):
        self.sources, self.seed, self.shuffle = sources, seed, shuffle
        self.shares = shares(batch_size, [s.ratio for s in sources])
        self.epochs = [0] * len(sources)
        self.cursors = [0] * len(sources)
        self.orders = [self._order(i, 0) for i in range(len(sources))]

    def _order(self, index: int, epoch: int) -> list[int]:
        order = list(range(len(self.sources[index].samples)))
        if self.shuffle:  # a string seed hashes the same in every process (unlike hash() of a tuple)
            random.Random(f"sft/{self.seed}/{index}/{epoch}").shuffle(order)
        return order

    def next_batch(self) -> list[TrainingSample]:
        batch = []
        for index, count in enumerate(self.shares):
            samples = self.sources[index].samples
            for _ in range(count):
                batch.append(samples[self.orders[index][self.cursors[index]]])
                self.cursors[index] += 1
                if self.cursors[index] == len(samples):
                    self.epochs[index] += 1
                    self.cursors[index] = 0
                    self.orders[index] = self._order(index, self.epochs[index])
        return batch

    @property
    def epoch(self) -> float:
        """Epochs of the first source done so far (1.5: one and a half)."""
        return self.epochs[0] + self.cursors[0] / len(self.sources[0].samples)

    def steps_per_epoch(self) -> float:
        """Steps for one pass over the first source."""
        return len(self.sources[0].samples) / max(self.shares[0], 1)

    def state(self) -> dict[str, Any]:
        return {"sources": [{"name": s.name, "rows": len(s.samples), "epoch": e, "cursor": c}
                            for s, e, c in zip(self.sources, self.epochs, self.cursors, strict=True)]}

    def restore(self, state: dict[str, Any]) -> list[str]:
        """Where a checkpoint left off. A source whose name or row count changed since starts its order over:
        the names of those are returned (the resumed order is then not the straight run's)."""
        saved = state.get("sources") or []
        changed = [s.name for s in self.sources[len(saved):]]
        for index, (source, entry) in enumerate(zip(self.sources, saved, strict=False)):
            if entry.get("rows") != len(source.samples) or entry.get("name") != source.name:
                changed.append(source.name)
                continue
            self.epochs[index], self.cursors[index] = int(entry["epoch"]), int(entry["cursor"])
            self.orders[index] = self._order(index, self.epochs[index])
        return changed
