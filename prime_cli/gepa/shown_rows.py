"""Train rows a parent was already scored on, shown to its reflection beside the fresh minibatch: their
rollouts are paid for, so the reflection reads more of the parent's failures for nothing. They are not
judged on: until issue 57 the child was scored on some of them too (a "known rows" gate beside the
3-row minibatch), but under fresh sampling noise the parent's old scores there are stale draws, and the
gate's six child rollouts per proposal bought less than the proposals they displaced (30 seeds of
benchmarks/gepa_vs_gepa.py: dropping it raised test accuracy by +0.03 at -B 600 on family edit and
+0.06 at 300 on sim)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable


def charged_rows(charged: Iterable[str], phash: str, rollouts_per_row: int) -> list[int]:
    """The train rows all of whose rollouts of the prompt `phash` are charged, in row order."""
    counts: dict[int, int] = {}
    for key in charged:  # evaluator.rollout_key: "{split}/{row}/{rollout}/{phash}"
        split, row, _rollout, key_hash = key.split("/", 3)
        if split == "train" and key_hash == phash:
            counts[int(row)] = counts.get(int(row), 0) + 1
    return sorted(row for row, n in counts.items() if n >= rollouts_per_row)


def lowest_rows(rows: Iterable[int], scores: Callable[[list[int]], list[float | None]], limit: int,
                salt: int) -> list[int]:
    """Up to `limit` of `rows` with the lowest scores (rows without a score left out; ties vary with `salt`)."""
    rows = list(rows)
    scored = [(score, zlib.crc32(f"{salt}:{row}".encode()), row) for row, score in zip(rows, scores(rows), strict=True)
              if score is not None]
    return sorted(row for _, _, row in sorted(scored)[:limit])
