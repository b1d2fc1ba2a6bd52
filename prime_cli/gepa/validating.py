"""Validating a child that won its minibatch (asked by the engine's commit): on every row the budget left
pays for (validation.py), the first half of them first, and the rest only if the child is not below its
parent there (_race)."""

from __future__ import annotations

from .config import GepaConfig
from .evaluator import VALIDATION, Evaluator, Ledger
from .proposal import ProposalResult
from .run_dir import GepaRunDir
from .scored import RowScore, errored_note, mostly_errored
from .state import Candidate
from .validation import payable_rows, rows_run


class Validator:
    """Validates children into the committed `candidates` (the search state's own list), charging `ledger`."""

    def __init__(self, config: GepaConfig, evaluator: Evaluator, ledger: Ledger, candidates: list[Candidate],
                 validation_order: list[int], run_dir: GepaRunDir | None) -> None:
        self.config, self.evaluator, self.ledger, self.candidates = config, evaluator, ledger, candidates
        self.validation_order, self.num_val, self.run_dir = validation_order, len(validation_order), run_dir

    async def validate(self, result: ProposalResult, allowance: int) -> tuple[int | None, str, str | None]:
        """Score a child that won its minibatch on every validation row the budget left pays for (all of them, or
        the first rows of validation.py's order; the rest stay None), or on the first half only when it is below
        its parent there (_race), and keep it as a candidate, unless most of its validation rollouts errored.
        `allowance`: the rollouts the budget lets it spend (stopping.BudgetSpent.validation_allowance).
        Returns its index (None: not kept), the reason, and why it was validated in part ("budget", "race";
        None: on every row)."""
        plan, prompt, candidates = result.plan, result.child_prompt, self.candidates
        assert prompt is not None
        charged = self.ledger.charged
        rows = sorted(payable_rows(self.validation_order, allowance,
                                   lambda row: sum(k not in charged for k in self.evaluator.keys(prompt, "val", [row]))))
        if len(rows) < self.config.min_validation_rows:  # a guard: the reserves keep at least this much
            return None, "better on minibatch, but the budget ran out before validation", None
        payable = len(rows)
        rows = await self._race(prompt, candidates[plan.parent], rows)
        cut = "race" if len(rows) < payable else "budget" if payable < self.num_val else None
        row_scores = await self.evaluator.scores(prompt, "val", rows, priority=VALIDATION)
        self.ledger.charge(self.evaluator.keys(prompt, "val", rows))
        val_errored = self.evaluator.errored(prompt, "val", rows)
        parent = candidates[plan.parent]
        parent_rows = set(rows_run(self.validation_order, parent.val_rows_run))
        parent_val_errored = self.evaluator.errored(parent.prompt, "val", [r for r in rows if r in parent_rows])
        val_rollouts = len(rows) * self.evaluator.r
        if mostly_errored(val_errored, val_rollouts, parent_val_errored):
            return None, "better on minibatch, but " + errored_note(val_errored, val_rollouts, "validation", parent_val_errored), None
        scores: list[RowScore] = [None] * self.num_val
        for row, score in zip(rows, row_scores, strict=True):
            scores[row] = score
        child_idx = len(candidates)
        candidates.append(Candidate(child_idx, prompt, plan.parent, scores, plan.iteration, self.ledger.used,
                                          val_errored, len(rows)))
        if self.run_dir is not None:
            self.run_dir.save_candidate(candidates[-1])
        return child_idx, "accepted", cut

    async def _race(self, prompt: str, parent: Candidate, rows: list[int]) -> list[int]:
        """The validation rows a child is run on: its first half (in validation.py's order) first, and the rest
        only if it is not below its parent there. A child below its parent won its minibatch by luck; it is
        kept, validated in part (on its rows it is in the Pareto front), and the other half of a pass is saved.
        (Not against the best: the best's score is the luckiest of many, and every child would look worse.)"""
        half = max(self.config.min_validation_rows, self.num_val // 2)
        if len(rows) <= half:
            return rows
        order = {row: i for i, row in enumerate(self.validation_order)}
        first = sorted(rows, key=order.__getitem__)[:half]
        scores = await self.evaluator.scores(prompt, "val", first, priority=VALIDATION)
        theirs = parent.val_scores
        shared = [i for i, row in enumerate(first) if scores[i] is not None and theirs[row] is not None]
        if shared and sum(scores[i] or 0.0 for i in shared) < sum(theirs[first[i]] or 0.0 for i in shared):
            return sorted(first)
        return rows

