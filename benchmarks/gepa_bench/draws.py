"""Where the scripted models of benchmarks/gepa_vs_gepa.py get their random choices (plain Python: both
optimisers' sides import the families that use it).

- fresh (the default): every choice is a new draw from one `random.Random` per scripted server (one
  server per run, seeded from the family and the benchmark seed, so prime and gepa at the same seed
  start from the same state). The same request asked twice may get another answer, as from a real
  model sampled at temperature > 0. The two optimisers send their requests in different orders, so
  they see different draws, with the same statistics.
- frozen: every choice is a crc32 of the request's text and a label, so the same request always gets
  the same answer (what the benchmark did before fresh noise: a lucky score is never undone by asking
  again). Kept for comparison.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import TypeVar

NOISE_KINDS = ("fresh", "frozen")
T = TypeVar("T")


class Draws:
    def __init__(self, noise: str, seed: str) -> None:
        if noise not in NOISE_KINDS:
            raise ValueError(f"noise must be one of {', '.join(NOISE_KINDS)}, not {noise!r}")
        self.noise = noise
        self._rng = random.Random(seed)  # a str seed is hashed the same way in every process

    def _hash(self, key: tuple[str, ...]) -> int:
        return zlib.crc32("\x00".join(key).encode())

    def chance(self, percent: float, *key: str) -> bool:
        """True with probability percent/100; frozen: decided by the key alone."""
        if self.noise == "fresh":
            return self._rng.random() * 100 < percent
        return self._hash(key) % 100 < percent

    def pick(self, options: Sequence[T], *key: str) -> T:
        if self.noise == "fresh":
            return options[self._rng.randrange(len(options))]
        return options[self._hash(key) % len(options)]
