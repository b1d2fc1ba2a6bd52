"""What the next proposal is: its parent, its train rows and its kind.

- "reflect": GEPA's reflective mutation of a parent drawn from the Pareto front.
- "edit" (edit_step.py): once from each candidate that becomes the best, and when proposals run dry.
- "merge": the best candidate plus the instructions a Pareto candidate of another lineage found (GEPA's
  merge, line by line and without a model call: two lineages that each found some of the rules are
  worth one prompt with all of them). Once per pair.

The Planner owns every choice a plan makes: the RNG, the minibatch sampler and the candidates already
edited and merged (the same objects the saved SearchState holds, so a resumed run plans on from where
it stopped). The RNG draws a parent and a minibatch for every plan, whatever its kind, so the draws of
a run do not depend on which kinds it made. Planning reads committed data only (resume makes the same
plans). `fork()` is a copy that plans ahead without touching this one (speculation.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from .config import GepaConfig
from .evaluator import prompt_hash
from .instructions import merged_prompt
from .pareto import best_candidate, front_counts, row_fronts, select_parent
from .scored import RowScore
from .shown_rows import charged_rows, lowest_rows
from .state import Candidate, MinibatchSampler, Plan, SearchState

TrainScores = Callable[[str, list[int]], list[RowScore]]
"""A prompt's scores on train rows whose rollouts are cached (None for another row)."""


def merge_partner(candidates: list[Candidate], best: int, merged: list[list[int]]) -> int | None:
    """The Pareto candidate whose instructions add the most to the best's (not merged with it before, and
    not giving a prompt some candidate already has)."""
    counts = front_counts(row_fronts([c.val_scores for c in candidates]))
    prompts = {c.prompt for c in candidates}
    options = []
    for other in counts:
        if other == best or [best, other] in merged:
            continue
        text = merged_prompt(candidates, best, other)
        if text is not None and text not in prompts:
            options.append((-text.count("\n"), -counts[other], other))
    return min(options)[2] if options else None


class Planner:
    """Makes the search's plans, one per iteration, in order (the module's docstring)."""

    def __init__(self, config: GepaConfig, seed_prompt: str, num_val: int, rollouts_per_row: int,
                 train_scores: TrainScores, rng: random.Random, sampler: MinibatchSampler,
                 edited: list[int], merged: list[list[int]]) -> None:
        self.config, self.seed_prompt, self.num_val = config, seed_prompt, num_val
        self.rollouts_per_row, self.train_scores = rollouts_per_row, train_scores
        self.rng, self.sampler, self.edited, self.merged = rng, sampler, edited, merged

    @classmethod
    def of(cls, state: SearchState, config: GepaConfig, seed_prompt: str, num_val: int, rollouts_per_row: int,
           train_scores: TrainScores) -> Planner:
        """The planner of a search: its RNG, sampler and edited/merged lists are the state's own objects."""
        assert state.sampler is not None
        return cls(config, seed_prompt, num_val, rollouts_per_row, train_scores, state.rng, state.sampler,
                   state.edited, state.merged)

    def fork(self) -> Planner:
        """A copy whose plans are the ones this planner would make next, leaving this one as it is."""
        rng = random.Random()
        rng.setstate(self.rng.getstate())
        sampler = MinibatchSampler(self.sampler.num_rows, list(self.sampler.order), self.sampler.pos)
        return Planner(self.config, self.seed_prompt, self.num_val, self.rollouts_per_row, self.train_scores,
                       rng, sampler, list(self.edited), [list(pair) for pair in self.merged])

    def prompt_of(self, candidates: list[Candidate], idx: int) -> str:
        """Candidate idx's prompt; the seed's while it is still being scored (no candidate yet)."""
        return candidates[idx].prompt if idx < len(candidates) else self.seed_prompt

    def next_plan(self, iteration: int, candidates: list[Candidate], charged: Iterable[str], dry: bool = False) -> Plan:
        """The plan of `iteration`, from the committed `candidates` and `charged` rollout keys. `dry`: proposals
        ran dry (an edit of the best)."""
        config, r = self.config, self.rollouts_per_row
        # while the seed is still being scored it is the only candidate: it is the parent whatever its
        # scores, and the draw uses the RNG the same way
        planning_scores = [c.val_scores for c in candidates] or [[0.0] * self.num_val]
        parent = select_parent(planning_scores, self.rng, [c.val_rows_run for c in candidates] or None)
        minibatch = self.sampler.next(config.minibatch_size, self.rng)
        kind, other = "reflect", None
        if candidates:  # not while the seed is still being scored
            best = best_candidate([c.val_scores for c in candidates], [c.val_rows_run for c in candidates])
            if dry or best not in self.edited:
                kind, parent = "edit", best
                self.edited.append(best)
            elif (partner := merge_partner(candidates, best, self.merged)) is not None:
                kind, parent, other = "merge", best, partner
                self.merged.append([best, partner])
        prompt = self.prompt_of(candidates, parent)
        paid = charged_rows(charged, prompt_hash(prompt), r)
        others = [row for row in paid if row not in minibatch]
        shown = lowest_rows(others, lambda rows: self.train_scores(prompt, rows), config.shown_rows, salt=iteration)
        return Plan(iteration, parent, minibatch, kind, [], other, shown)
