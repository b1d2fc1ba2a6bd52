"""One proposal of the search: the parent's and the child's minibatch results, and whether the child is
better on the minibatch (errored rollouts left out, scored.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .scored import RowScore, both_scored, errored_note, mostly_errored
from .state import Plan


@dataclass
class ProposalResult:
    plan: Plan
    parent_scores: list[RowScore]
    keys: list[str]
    reason: str = ""
    child_prompt: str | None = None
    child_scores: list[RowScore] | None = None
    parent_errored: int = 0  # minibatch rollouts that errored: counted, left out of the scores
    child_errored: int = 0
    reflected: bool = False
    reflection_failed: bool = False
    reflection_reply: str | None = None
    reflection_truncated: bool = False
    started: float = field(default_factory=time.monotonic)


def minibatch_verdict(result: ProposalResult, rollouts_per_row: int) -> str | None:
    """Why the child is not better than its parent on the minibatch (None: it is). Errored rollouts are
    left out: the two are compared on the rows both were scored on, and a child that mostly errored
    (more than its parent) is not judged on the rest."""
    assert result.child_scores is not None
    rollouts = len(result.parent_scores) * rollouts_per_row
    if mostly_errored(result.child_errored, rollouts, result.parent_errored):
        return errored_note(result.child_errored, rollouts, "minibatch", result.parent_errored)
    rows = both_scored(result.parent_scores, result.child_scores)
    if not rows:
        return "no minibatch row was scored for both parent and child (their rollouts errored)"
    child = sum(result.child_scores[i] or 0.0 for i in rows)
    parent = sum(result.parent_scores[i] or 0.0 for i in rows)
    if child <= parent:
        left_out = len(result.parent_scores) - len(rows)
        return "not better on minibatch" + (f" (compared on the {len(rows)} rows both were scored on; "
                                             f"{left_out} with errored rollouts left out)" if left_out else "")
    return None
