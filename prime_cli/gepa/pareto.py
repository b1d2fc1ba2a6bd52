"""The Pareto front over validation rows and GEPA's parent selection.

Each validation row has a front: the candidates with the best score on that row. A candidate
is dominated when another one is on every front it is on (and on at least one more). A parent is
drawn among the non-dominated candidates, weighted by how many rows' fronts each is on.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

EPSILON = 1e-9


def row_fronts(val_scores: Sequence[Sequence[float]]) -> list[set[int]]:
    """For each validation row, the candidates (indices) with the best score on it."""
    if not val_scores:
        return []
    fronts = []
    for row in range(len(val_scores[0])):
        best = max(scores[row] for scores in val_scores)
        fronts.append({i for i, scores in enumerate(val_scores) if scores[row] >= best - EPSILON})
    return fronts


def non_dominated(fronts: Sequence[set[int]]) -> set[int]:
    """Candidates on some front whose set of fronts is not strictly inside another's.
    Among candidates on exactly the same fronts, all are kept (none dominates the others)."""
    membership: dict[int, frozenset[int]] = {}
    for row, front in enumerate(fronts):
        for cand in front:
            membership[cand] = membership.get(cand, frozenset()) | {row}
    return {c for c, rows in membership.items()
            if not any(rows < other for o, other in membership.items() if o != c)}


def front_counts(fronts: Sequence[set[int]]) -> dict[int, int]:
    """How many rows' fronts each non-dominated candidate is on."""
    keep = non_dominated(fronts)
    counts: dict[int, int] = {}
    for front in fronts:
        for cand in front & keep:
            counts[cand] = counts.get(cand, 0) + 1
    return counts


def select_parent(val_scores: Sequence[Sequence[float]], rng: random.Random) -> int:
    """A non-dominated candidate, drawn with probability proportional to its front count."""
    counts = front_counts(row_fronts(val_scores))
    if not counts:
        return 0
    candidates = sorted(counts)
    return rng.choices(candidates, weights=[counts[c] for c in candidates], k=1)[0]


def best_candidate(val_scores: Sequence[Sequence[float]]) -> int:
    """Highest mean validation score; the earliest candidate wins ties."""
    means = [sum(s) / len(s) if s else 0.0 for s in val_scores]
    return max(range(len(means)), key=lambda i: (means[i], -i))
