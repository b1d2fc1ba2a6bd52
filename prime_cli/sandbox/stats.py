"""How many sandboxes a run started and failed, and how long starting took (p50/p95 per provider).

One process-wide recorder: the eval runner resets it when a run starts and puts `summary()` in the
run's summary and metadata. Starts happen on the event loop thread; a lock keeps threads honest too.
"""

from __future__ import annotations

import threading
from collections import defaultdict


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(int(round(q * (len(ordered) - 1))), len(ordered) - 1)
    return ordered[index]


class SandboxStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._starts: dict[str, list[float]] = defaultdict(list)
            self._failures: dict[str, int] = defaultdict(int)

    def started(self, provider: str, seconds: float) -> None:
        with self._lock:
            self._starts[provider].append(seconds)

    def failed(self, provider: str) -> None:
        with self._lock:
            self._failures[provider] += 1

    def summary(self) -> dict[str, dict[str, float | int]]:
        """{provider: {started, failed, start_p50_s, start_p95_s}}; empty when no sandbox was asked for."""
        with self._lock:
            names = sorted(set(self._starts) | set(self._failures))
            return {name: {"started": len(self._starts[name]), "failed": self._failures[name],
                           "start_p50_s": round(percentile(self._starts[name], 0.5), 4),
                           "start_p95_s": round(percentile(self._starts[name], 0.95), 4)} for name in names}


STATS = SandboxStats()


def summary_line(summary: dict[str, dict[str, float | int]]) -> str | None:
    """`sandboxes: bwrap 20 started, 0 failed, start p50 0.031 s / p95 0.052 s` (None without any)."""
    if not summary:
        return None
    parts = []
    for name, row in summary.items():
        label = "none (unsandboxed)" if name == "none" else name
        parts.append(f"{label} {row['started']} started, {row['failed']} failed, start p50 "
                     f"{row['start_p50_s']:.3f} s / p95 {row['start_p95_s']:.3f} s")
    return "sandboxes: " + "; ".join(parts)
