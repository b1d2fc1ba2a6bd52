"""One proposal of the search, run (a part of GepaEngine, kept apart for size): the parent on its rows, the
reflection (or the edit step's, or a merge without a model call), the child on the same rows.

What the reflection reads: the parent's rollouts on the plan's rows (the fresh minibatch, then the known
rows) and on its lowest other known train rows (`Plan.shown`, planner.py), all from the cache once run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prime_cli.clients.errors import FatalEndpointError
from prime_cli.envs.errors import ModelError
from prime_cli.envs.messages import content_text

from .cost import metered
from .edit_step import edit_prompt
from .instructions import instructions_with_evidence, merged_prompt
from .proposal import ProposalResult
from .reflection import Proposal, parse_reply, reflection_prompt
from .scored import RowScore, errored, row_score
from .state import Plan

EVIDENCE_ROWS_PER_INSTRUCTION, MAX_EVIDENCE_ROWS = 2, 6


class ReflectionAborted(Exception):
    """The reflection model failed for good (endpoint unusable, or too many failures in a row)."""


class Proposing:
    """Methods of GepaEngine that run a proposal; they decide nothing (the commit does)."""

    config: Any
    state: Any
    evaluator: Any
    metric_names: list[str]
    _replies: dict[str, Any]
    _prompt: Callable[[int], str]

    async def _propose(self, plan: Plan) -> ProposalResult:
        parent_prompt, rows = self._prompt(plan.parent), plan.rows
        entries = await self.evaluator.row_results(parent_prompt, "train", rows)
        parent_scores = [row_score(row) for row in entries]
        result = ProposalResult(plan, parent_scores, self.evaluator.keys(parent_prompt, "train", rows),
                                parent_errored=errored(entries))
        perfect = self.config.perfect_score
        if perfect is not None and all(s is not None and s >= perfect for s in parent_scores):
            result.reason = "minibatch already perfect"
            return result
        if plan.kind == "merge":
            proposal = Proposal(merged_prompt(self.state.candidates, plan.parent, plan.other or 0), "merged")
        else:
            proposal = await self._reflect(self._reflection_text(plan, parent_prompt, entries))
        result.reflected = plan.kind != "merge"
        result.reflection_reply, result.reflection_truncated = proposal.raw, proposal.truncated
        if proposal.prompt is None:
            result.reason = proposal.reason
            result.reflection_failed = proposal.reason.startswith("reflection failed")
            return result
        result.child_prompt = proposal.prompt
        if proposal.prompt == parent_prompt:
            result.reason = "reflection returned the parent prompt unchanged"
            return result
        # only candidates every run has committed by now (the plan came after the commit of iteration - P),
        # so that a resumed or a differently timed run skips the same children; the commit finds the others
        committed = plan.iteration - self.config.parallel_proposals
        duplicate = next((c.idx for c in self.state.candidates if committed >= 1 and c.iteration <= committed
                          and c.prompt == proposal.prompt), None)
        if duplicate is not None:  # its rollouts would buy nothing
            result.reason = f"same prompt as candidate {duplicate}"
            return result
        result.child_scores = await self.evaluator.scores(proposal.prompt, "train", rows)
        result.child_errored = self.evaluator.errored(proposal.prompt, "train", rows)
        result.keys += self.evaluator.keys(proposal.prompt, "train", rows)
        return result

    def _train_scores(self, prompt: str, rows: list[int]) -> list[RowScore]:
        """A prompt's scores on train rows whose rollouts are all in the cache (None for another row)."""
        cache = self.evaluator.cache
        row_keys = [self.evaluator.keys(prompt, "train", [row]) for row in rows]
        return [row_score([cache.get(k) for k in keys]) if all(k in cache for k in keys) else None for keys in row_keys]

    def _reflection_text(self, plan: Plan, parent_prompt: str, entries: list[list[dict[str, Any]]]) -> str:
        """What the reflection reads: the parent on the plan's rows, then on its lowest other known rows."""
        cache = self.evaluator.cache
        records = [e["record"] for row in entries for e in row]
        records += [cache.get(k)["record"] for k in self.evaluator.keys(parent_prompt, "train", plan.shown) if k in cache]
        if plan.kind == "edit":
            return self._edit_text(plan.parent, records)
        return reflection_prompt(parent_prompt, records, self.metric_names)

    def _edit_text(self, idx: int, train_records: list[dict[str, Any]]) -> str:
        """The edit step's reflection prompt: candidate idx's instructions with the validation rows each made
        worse (its own records on them, from the cache), and its train records."""
        candidate, cache = self.state.candidates[idx], self.evaluator.cache
        instructions = instructions_with_evidence(self.state.candidates, idx)
        val_records: dict[int, dict[str, Any]] = {}
        for item in reversed(instructions):  # the newest first: the likeliest to be wrong, and least tested
            for row in item.worse_rows[:EVIDENCE_ROWS_PER_INSTRUCTION]:
                keys = self.evaluator.keys(candidate.prompt, "val", [row])
                if len(val_records) < MAX_EVIDENCE_ROWS and all(k in cache for k in keys):
                    worst = min((cache.get(k) for k in keys), key=lambda e: e.get("reward") is not None and e["reward"])
                    val_records[row] = worst["record"]  # its failing rollout (with -r > 1 another may pass)
        return edit_prompt(candidate.prompt, instructions, dict(sorted(val_records.items())), train_records,
                           self.metric_names)

    async def _call_reflection(self, text: str) -> Any:
        client, model = self.reflector.for_group(0)
        return await metered(self.evaluator.meter, client.chat([{"role": "user", "content": text}], model=model,
                                                               sampling_args=self.config.reflection_request_args()))

    async def _reflect(self, text: str) -> Proposal:
        ahead = self._replies.pop(text, None)  # the same call, made ahead by a prefetch
        try:
            response = await (ahead if ahead is not None else self._call_reflection(text))
        except FatalEndpointError as exc:
            raise ReflectionAborted(f"reflection model {self.config.reflector}: {exc}") from None
        except ModelError as exc:
            return Proposal(None, f"reflection failed: {exc}")
        return parse_reply(content_text(response.message), response.finish_reason)

