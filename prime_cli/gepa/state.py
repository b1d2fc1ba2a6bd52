"""The search state: candidates, the budget ledger, planned proposals, the sampler and the RNG.

It is saved as JSON (state.json) after every committed iteration; a resumed run loads it and
continues exactly where the saved run stood, the RNG included.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from prime_cli.records.gepa_run import Candidate, RowScore

from .pareto import best_candidate, whole_validation_score


@dataclass
class Plan:
    """A proposal chosen but not yet committed: which parent, on which train rows, and what kind.

    `known`: in plans saved before issue 57 only (empty since), train rows the parent was already scored on
    that the child was judged on beside the minibatch (shown_rows.py says why that gate went); a resumed run
    runs such a pending plan as it was made. `kind`: "reflect", "edit" or "merge" (planner.py)."""

    iteration: int
    parent: int
    minibatch: list[int]
    kind: str = "reflect"
    known: list[int] = field(default_factory=list)
    other: int | None = None  # a "merge": the candidate whose instructions join the parent's (planner.py)
    shown: list[int] = field(default_factory=list)
    """More train rows the parent was scored on, its lowest: shown to the reflection, not judged on (an
    unbiased judge needs rows not picked for failing), free (their rollouts are paid for)."""

    @property
    def rows(self) -> list[int]:
        """The train rows parent and child are compared on."""
        return [*self.minibatch, *self.known]


class MinibatchSampler:
    """Epoch-shuffled minibatches of train rows: every row once per epoch, reshuffled each epoch."""

    def __init__(self, num_rows: int, order: list[int] | None = None, pos: int = 0) -> None:
        self.num_rows = num_rows
        self.order = list(order or [])
        self.pos = pos

    def next(self, size: int, rng: random.Random) -> list[int]:
        size = min(size, self.num_rows)
        if not self.order or self.pos + size > len(self.order):
            self.order = list(range(self.num_rows))
            rng.shuffle(self.order)
            self.pos = 0
        batch = self.order[self.pos:self.pos + size]
        self.pos += size
        return batch


def rng_to_json(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def rng_from_json(data: list[Any]) -> random.Random:
    rng = random.Random()
    rng.setstate((data[0], tuple(data[1]), data[2]))
    return rng


@dataclass
class SearchState:
    seed: int
    num_train: int
    candidates: list[Candidate] = field(default_factory=list)
    charged: list[str] = field(default_factory=list)
    last_planned: int = 0
    last_committed: int = 0
    pending: list[Plan] = field(default_factory=list)
    consecutive_reflection_failures: int = 0
    idle_commits: int = 0
    fruitless_reflections: int = 0
    """Reflections in a row that gave no new prompt to try while no new rollout was paid for."""
    edited: list[int] = field(default_factory=list)
    """Candidates an edit step started from (edit_step.py: once from each candidate that becomes the best)."""
    dry_edits: int = 0
    """Edit steps made because proposals ran dry, since the last accepted child."""
    merged: list[list[int]] = field(default_factory=list)
    """[best, other] pairs a merge was planned for (planner.py: once per pair)."""
    rng: random.Random = field(default_factory=random.Random)
    sampler: MinibatchSampler | None = None
    picked: int | None = None
    """The final pick (picking.py), once a search has ended with one; None: the best by validation."""

    def __post_init__(self) -> None:
        if self.sampler is None:
            self.rng = random.Random(self.seed)
            self.sampler = MinibatchSampler(self.num_train)

    @property
    def val_scores(self) -> list[list[RowScore]]:
        return [c.val_scores for c in self.candidates]

    def best(self) -> Candidate:
        """The final pick once made (picking.py), else pareto.best_candidate (partially validated candidates on
        a paired comparison)."""
        if self.picked is not None:
            return self.candidates[self.picked]
        return self.candidates[best_candidate(self.val_scores, [c.val_rows_run for c in self.candidates])]

    def score_of(self, candidate: Candidate) -> float | None:
        """Its validation score over every row (pareto.whole_validation_score): metadata's best_score."""
        return whole_validation_score(self.val_scores, [c.val_rows_run for c in self.candidates], candidate.idx)

    def to_json(self, charged: set[str]) -> dict[str, Any]:
        assert self.sampler is not None
        return {
            "version": 1, "seed": self.seed, "num_train": self.num_train,
            "candidates": [dict(vars(c)) for c in self.candidates],  # flat fields: asdict's deep copy cost ms per save
            "charged": sorted(charged),
            "last_planned": self.last_planned, "last_committed": self.last_committed,
            "pending": [asdict(p) for p in self.pending],
            "consecutive_reflection_failures": self.consecutive_reflection_failures,
            "idle_commits": self.idle_commits,
            "fruitless_reflections": self.fruitless_reflections,
            "edited": self.edited, "dry_edits": self.dry_edits, "merged": self.merged,
            "rng": rng_to_json(self.rng),
            "sampler": {"order": self.sampler.order, "pos": self.sampler.pos},
            "picked": self.picked,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchState:
        sampler = MinibatchSampler(int(data["num_train"]), data["sampler"]["order"], int(data["sampler"]["pos"]))
        state = cls(seed=int(data["seed"]), num_train=int(data["num_train"]),
                    candidates=[Candidate(**c) for c in data["candidates"]], charged=list(data["charged"]),
                    last_planned=int(data["last_planned"]), last_committed=int(data["last_committed"]),
                    pending=[Plan(**p) for p in data["pending"]],
                    consecutive_reflection_failures=int(data.get("consecutive_reflection_failures", 0)),
                    idle_commits=int(data.get("idle_commits", 0)),
                    fruitless_reflections=int(data.get("fruitless_reflections", 0)),
                    edited=[int(i) for i in data.get("edited", [])], dry_edits=int(data.get("dry_edits", 0)),
                    merged=[[int(a), int(b)] for a, b in data.get("merged", [])],
                    rng=rng_from_json(data["rng"]), sampler=sampler, picked=data.get("picked"))
        return state
