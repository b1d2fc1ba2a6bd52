"""The final pick: which candidate the run returns as best.

The best by validation mean is the highest of many noisy scores. Late in a search many candidates are
within the student's sampling noise of each other, and the one that drew the luckiest rollouts leads: its
validation score overstates its test score (the winner's curse), and a truly better one that was unlucky
is passed over. So once the search has stopped, the leader (pareto.best_candidate) meets the next
CHALLENGERS candidates by their mean on the rows both were scored on, one at a time: on each validation
row where the two disagree, both are rolled out again (evaluator.CONFIRM: fresh rollouts under keys of
their own), and the challenger takes the lead only if it is ahead on those fresh rollouts, re-rolled on at
least pareto.MARGIN_ROWS rows (one draw on one row is as likely the student's noise; with -N 1 it would
overturn the whole validation). Rows where the two agree say nothing about which is better, so only the
rows they disagree on are paid for; the fresh rollouts are new draws, not the ones the ranking was made
on, so they are a fair judge. A lead of 2 or more as the bar was tried: it rarely overturns, and on
benchmarks/gepa_vs_gepa.py (30 seeds, fresh noise, -B 600) it cost test accuracy (sim -0.005 +-0.008)
and widened the validation-test gap (+0.015 +-0.014).

The rollouts are paid from what the search left of the budget (no reserve is held back for them: held
back, a tenth of the budget cost more test accuracy in the search than the pick won back, issue 57); rows
the budget cannot pay for are left out, in the shared validation order (validation.py). With nothing left
to pay with, the leader is the pick. The record (metadata.json `pick`) says how the best was chosen: its
validation score (`best_score`) rests on `score_rollouts` rollouts, the choice also on `fresh_rollouts`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .evaluator import CONFIRM, Evaluator, Ledger
from .pareto import MARGIN_ROWS, best_candidate
from .scored import RowScore, both_scored
from .state import Candidate
from .validation import payable_rows

CHALLENGERS = 2
METHOD = ("the best validation mean (partially validated candidates on a paired lead), then against the next "
          f"{CHALLENGERS} on fresh rollouts of the validation rows where their scores disagree (a lead on "
          f"{MARGIN_ROWS} or more such rows takes the place)")


def challengers(candidates: list[Candidate], leader: int, limit: int) -> list[int]:
    """The `limit` candidates with the highest mean on the rows both they and the leader were scored on."""
    mine = candidates[leader].val_scores
    ranked = []
    for c in candidates:
        shared = both_scored(c.val_scores, mine)
        if c.idx != leader and shared:
            ranked.append((-sum(float(c.val_scores[r] or 0.0) for r in shared) / len(shared), c.idx))
    return [idx for _, idx in sorted(ranked)[:limit]]


class FinalPick:
    """Runs the final pick over the committed `candidates`, charging `ledger` (the module's docstring)."""

    def __init__(self, evaluator: Evaluator, ledger: Ledger, candidates: list[Candidate], max_calls: int,
                 validation_order: list[int]) -> None:
        self.evaluator, self.ledger, self.candidates = evaluator, ledger, candidates
        self.max_calls, self.order = max_calls, validation_order

    async def pick(self) -> tuple[int, dict[str, Any]]:
        """The index of the best candidate and metadata.json's `pick` record."""
        candidates = self.candidates
        leader = best_candidate([c.val_scores for c in candidates], [c.val_rows_run for c in candidates])
        first = leader
        duels = []
        for other in challengers(candidates, leader, CHALLENGERS):
            duel = await self._duel(leader, other)
            duels.append(duel)
            if duel["won"]:
                leader = other
        return leader, {"method": METHOD, "leader_by_validation": first, "best": leader, "duels": duels,
                        **self._rollouts(leader)}

    async def _duel(self, leader: int, other: int) -> dict[str, Any]:
        mine, theirs = self.candidates[leader], self.candidates[other]
        disagree = {r for r in both_scored(mine.val_scores, theirs.val_scores) if mine.val_scores[r] != theirs.val_scores[r]}
        charged = self.ledger.charged
        rows = payable_rows([r for r in self.order if r in disagree], self.max_calls - self.ledger.used,
                            lambda row: sum(k not in charged for c in (mine, theirs)
                                            for k in self.evaluator.keys(c.prompt, CONFIRM, [row])))
        lead = 0.0
        if rows:
            ours, others = await asyncio.gather(self.evaluator.scores(mine.prompt, CONFIRM, rows),
                                                self.evaluator.scores(theirs.prompt, CONFIRM, rows))
            self.ledger.charge(self.evaluator.keys(mine.prompt, CONFIRM, rows) + self.evaluator.keys(theirs.prompt, CONFIRM, rows))
            lead = _lead(others, ours)
        return {"leader": leader, "challenger": other, "rows_disagreeing": len(disagree), "rows_rerun": len(rows),
                "challenger_lead": lead, "won": lead > 0 and len(rows) >= MARGIN_ROWS}

    def _rollouts(self, idx: int) -> dict[str, int]:
        """The validation rollouts the candidate's score rests on, and the fresh ones its choice rests on too."""
        c = self.candidates[idx]
        rows = [r for r, s in enumerate(c.val_scores) if s is not None]
        fresh = sum(k in self.ledger.charged for k in self.evaluator.keys(c.prompt, CONFIRM, rows))
        return {"score_rollouts": len(rows) * self.evaluator.r, "fresh_rollouts": fresh}


def _lead(challenger: list[RowScore], leader: list[RowScore]) -> float:
    """The challenger's summed lead over the rows both were scored on afresh."""
    return sum(float(c) - float(lead) for c, lead in zip(challenger, leader, strict=True) if c is not None and lead is not None)
