"""Where the scripted models of benchmarks/gepa_vs_gepa.py get their random choices (plain Python: both
optimisers' sides import the families that use it).

- fresh (the default): every choice is a new draw. The same request asked twice may get another answer,
  as from a real model sampled at temperature > 0. The n-th time a request (its text and label) is
  asked, its draw is a hash of (the run's seed, the request, n): it does not depend on the order
  requests arrive in, so a run is repeatable, and prime and gepa at the same seed get the same answer
  the n-th time each asks the same thing (common random numbers: their paired difference is not
  blurred by which of them happened to draw a lucky stream). A seed is the family and the benchmark seed.
- frozen: every choice is a crc32 of the request's text and a label, so the same request always gets
  the same answer (what the benchmark did before fresh noise: a lucky score is never undone by asking
  again). Kept for comparison.
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

NOISE_KINDS = ("fresh", "frozen")
T = TypeVar("T")


class Draws:
    def __init__(self, noise: str, seed: str) -> None:
        if noise not in NOISE_KINDS:
            raise ValueError(f"noise must be one of {', '.join(NOISE_KINDS)}, not {noise!r}")
        self.noise, self.seed = noise, seed
        self._asked: Counter[str] = Counter()
        self._lock = threading.Lock()  # the scripted server answers from several threads

    def _fresh(self, key: tuple[str, ...]) -> float:
        """Uniform in [0, 1): the draw of the n-th time `key` is asked."""
        text = "\x00".join(key)
        with self._lock:
            n = self._asked[text]
            self._asked[text] += 1
        digest = hashlib.blake2b(f"{self.seed}\x00{n}\x00{text}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2 ** 64

    def _hash(self, key: tuple[str, ...]) -> int:
        return zlib.crc32("\x00".join(key).encode())

    def chance(self, percent: float, *key: str) -> bool:
        """True with probability percent/100; frozen: decided by the key alone."""
        if self.noise == "fresh":
            return self._fresh(key) * 100 < percent
        return self._hash(key) % 100 < percent

    def pick(self, options: Sequence[T], *key: str) -> T:
        if self.noise == "fresh":
            return options[int(self._fresh(key) * len(options))]
        return options[self._hash(key) % len(options)]
