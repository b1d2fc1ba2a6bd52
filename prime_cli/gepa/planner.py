"""What the next proposal is: its parent, its train rows and its kind.

- "reflect": GEPA's reflective mutation of a parent drawn from the Pareto front.
- "edit" (edit_step.py): once from each candidate that becomes the best, and when proposals run dry.
- "merge": the best candidate plus the instructions a Pareto candidate of another lineage found (GEPA's
  merge, line by line and without a model call: two lineages that each found some of the rules are
  worth one prompt with all of them). Once per pair.

The RNG draws a parent and a minibatch for every plan, whatever its kind, so the draws of a run do not
depend on which kinds it made. Planning reads committed data only (resume makes the same plans).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from .config import GepaConfig
from .evaluator import prompt_hash
from .instructions import merged_prompt
from .known_rows import charged_rows, known_rows, lowest_rows
from .pareto import best_candidate, front_counts, row_fronts, select_parent
from .scored import RowScore
from .state import Candidate, MinibatchSampler, Plan


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


def next_plan(config: GepaConfig, candidates: list[Candidate], planning_scores: list[list[RowScore]],
              iteration: int, rng: random.Random, sampler: MinibatchSampler, charged: Iterable[str],
              edited: list[int], merged: list[list[int]], prompt_of: Callable[[int], str], rollouts_per_row: int,
              known_room: int, train_scores: Callable[[str, list[int]], list[RowScore]], dry: bool = False) -> Plan:
    """The plan of `iteration`. Appends to `edited` / `merged` what it schedules (pass copies to foresee).
    `known_room`: the rollouts the budget lets it spend on known rows; `train_scores(prompt, rows)`: a prompt's
    scores on train rows it was scored on."""
    parent = select_parent(planning_scores, rng)
    minibatch = sampler.next(config.minibatch_size, rng)
    kind, other = "reflect", None
    if candidates:  # not while the seed is still being scored
        best = best_candidate([c.val_scores for c in candidates], [c.val_rows_run for c in candidates])
        if dry or best not in edited:
            kind, parent = "edit", best
            edited.append(best)
        elif (partner := merge_partner(candidates, best, merged)) is not None:
            kind, parent, other = "merge", best, partner
            merged.append([best, partner])
    prompt = prompt_of(parent)
    paid = charged_rows(charged, prompt_hash(prompt), rollouts_per_row)
    known = known_rows(paid, minibatch, min(config.known_rows, known_room // rollouts_per_row), salt=iteration)
    others = [row for row in paid if row not in minibatch and row not in known]
    shown = lowest_rows(others, lambda rows: train_scores(prompt, rows), config.known_rows, salt=iteration)
    return Plan(iteration, parent, minibatch, kind, known, other, shown)
