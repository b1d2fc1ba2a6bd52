"""The Pareto front over validation rows and GEPA's parent selection.

Each validation row has a front: the candidates with the best score on that row. A candidate
is dominated when another one is on every front it is on (and on at least one more). A parent is
drawn among the non-dominated candidates, weighted by how many rows' fronts each is on.
A score of None (every rollout of that row errored: scored.py) takes no part: a row's front is drawn
from the candidates scored on it, and a row no candidate was scored on has an empty front.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from .scored import RowScore, mean_scored

EPSILON = 1e-9


def row_fronts(val_scores: Sequence[Sequence[RowScore]]) -> list[set[int]]:
    """For each validation row, the candidates (indices) with the best score on it (among those scored there)."""
    if not val_scores:
        return []
    fronts = []
    for row in range(len(val_scores[0])):
        scored = {i: scores[row] for i, scores in enumerate(val_scores) if scores[row] is not None}
        best = max(scored.values(), default=0.0)
        fronts.append({i for i, score in scored.items() if score >= best - EPSILON})
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


def select_parent(val_scores: Sequence[Sequence[RowScore]], rng: random.Random) -> int:
    """A non-dominated candidate, drawn with probability proportional to its front count."""
    counts = front_counts(row_fronts(val_scores))
    if not counts:
        return 0
    candidates = sorted(counts)
    return rng.choices(candidates, weights=[counts[c] for c in candidates], k=1)[0]


def best_candidate(val_scores: Sequence[Sequence[RowScore]]) -> int:
    """Highest mean validation score over the rows every candidate was scored on, so that a candidate that
    errored on the hard rows is not ranked on the easy ones alone (without such rows: over the rows each
    was scored on; a candidate scored on none ranks last); the earliest candidate wins ties."""
    common = [i for i in range(min(map(len, val_scores), default=0))
              if all(scores[i] is not None for scores in val_scores)]
    if common:
        means: list[float | None] = [sum(float(s[i]) for i in common) / len(common) for s in val_scores]  # type: ignore[arg-type]
    else:
        means = [mean_scored(s) for s in val_scores]
    return max(range(len(means)), key=lambda i: (means[i] is not None, means[i] or 0.0, -i))
