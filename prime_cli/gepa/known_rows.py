"""Train rows a prompt was already scored on: the rollouts are paid for, so showing them to the reflection
and judging the child on them too costs only the child's rollouts (GEPA's 3-row minibatch alone is a noisy
judge: a lucky child wins it and then costs a whole validation pass)."""

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


def known_rows(rows: Iterable[int], exclude: Iterable[int], limit: int, salt: int) -> list[int]:
    """Up to `limit` of `rows` (charged_rows) not in `exclude`. Which ones varies with `salt` (the iteration),
    so a parent drawn again shows other rows; no RNG is used, so the search's draws are those of a run
    without them."""
    if limit <= 0:
        return []
    skip = set(exclude)
    picked = sorted((row for row in rows if row not in skip), key=lambda row: (zlib.crc32(f"{salt}:{row}".encode()), row))
    return sorted(picked[:limit])


def lowest_rows(rows: Iterable[int], scores: Callable[[list[int]], list[float | None]], limit: int,
                salt: int) -> list[int]:
    """Up to `limit` of `rows` with the lowest scores (rows without a score left out; ties vary with `salt`)."""
    rows = list(rows)
    scored = [(score, zlib.crc32(f"{salt}:{row}".encode()), row) for row, score in zip(rows, scores(rows), strict=True)
              if score is not None]
    return sorted(row for _, _, row in sorted(scored)[:limit])
