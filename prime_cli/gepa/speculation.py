"""Speculative prefetching for the GEPA loop (a part of GepaEngine, kept apart for size).

Speculation (--speculate S, off by default): the next S proposals the loop would plan if every
proposal in flight were rejected (the RNG and the sampler are copied, the validation scores are the
committed ones) are prefetched: their parent's minibatch rollouts go to the cache, their reflection
call is made and kept by its exact prompt text, and their child's minibatch is scored. The loop
itself is unchanged: it plans from committed data only and charges what it uses, so when its plan
matches a prefetched one it finds that work done, and when it does not (a proposal was accepted and
the parent drawn differs) the prefetch is dropped. Choices, charges and saved states are those of
the run without speculation; the price is model calls that are never used (counted in
metadata.json under "speculation").
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from prime_cli.envs.messages import content_text

from .instructions import merged_prompt
from .planner import next_plan
from .reflection import parse_reply
from .scored import row_score
from .state import MinibatchSampler, Plan
from .stopping import StopConditions

logger = logging.getLogger("prime_cli.gepa")


class Speculation:
    """Methods of GepaEngine that prefetch; they read the engine's state and never change a choice."""

    config: Any
    state: Any
    evaluator: Any
    ledger: Any
    metric_names: list[str]
    _tasks: dict[int, asyncio.Task]
    _replies: dict[str, asyncio.Task]
    _spec: dict[tuple[int, int], tuple[Plan, asyncio.Task, list[str]]]
    _dropped: list[asyncio.Task]
    stops: StopConditions
    spec_stats: dict[str, int]

    def _copies(self) -> tuple[random.Random, MinibatchSampler]:
        state = self.state
        assert state.sampler is not None
        rng = random.Random()
        rng.setstate(state.rng.getstate())
        return rng, MinibatchSampler(state.sampler.num_rows, list(state.sampler.order), state.sampler.pos)

    def _hypothetical_plans(self) -> list[Plan]:
        """The next plans the loop makes if every proposal in flight is rejected, as far as the budget
        surely lets it make them: each comes right after one more commit, which spends at most one
        proposal's rollouts."""
        rng, sampler = self._copies()
        scores = self._planning_scores()
        point = self._point()
        plans: list[Plan] = []
        iteration = self.state.last_planned
        # a rejected proposal charges its parent's rows: the known rows of the plans that follow
        charged = set(self.ledger.charged)
        for plan in self._plans.values():
            charged.update(self.evaluator.keys(self._prompt(plan.parent), "train", plan.rows))
        edited, merged = list(self.state.edited), [list(pair) for pair in self.state.merged]
        for _ in range(self.config.speculative_proposals):
            if point.in_flight == 0:  # the loop plans now, not after a commit: nothing to foresee
                break
            point = point.after_rejection(self.config.proposal_cost)
            if not self.stops.allow_launch(point):
                break
            iteration += 1
            plan = next_plan(self.config, self.state.candidates, scores, iteration, rng, sampler, charged, edited,
                             merged, self._prompt, self.evaluator.r, self.stops.budget.known_rows_room(point),
                             self._train_scores)
            plans.append(plan)
            charged.update(self.evaluator.keys(self._prompt(plan.parent), "train", plan.rows))
            point = point.after_launch()
        return plans

    def _spawn(self, plan: Plan, prompt: str) -> None:
        key = (plan.iteration, plan.parent)
        if key not in self._spec:
            keys: list[str] = []
            self._spec[key] = (plan, asyncio.ensure_future(self._prefetch(plan, prompt, keys)), keys)
            self.spec_stats["proposals"] += 1

    def _speculate(self) -> None:
        """Start the prefetches the current state foresees; drop those it no longer does."""
        if self.config.speculative_proposals <= 0:
            return
        wanted = {(plan.iteration, plan.parent): plan for plan in self._hypothetical_plans()}
        for key, (plan, _task, _keys) in list(self._spec.items()):
            if wanted.get(key) != plan:
                self._drop(key)
        for plan in wanted.values():
            self._spawn(plan, self._prompt(plan.parent))

    def _adopt(self, plan: Plan) -> None:
        """The loop plans `plan` for real: a matching prefetch has done (part of) its work; stop it and
        leave its reflection reply for the proposal to take. Other prefetches of that iteration go."""
        for key in [k for k in self._spec if k[0] == plan.iteration]:
            if self._spec[key][0] != plan:
                self._drop(key)
                continue
            task = self._spec.pop(key)[1]
            task.cancel()  # its rollouts run on (shared with the proposal), and so does its reflection call
            self._dropped.append(task)
            self.spec_stats["used"] += 1

    def _drop(self, key: tuple[int, int]) -> None:
        _plan, task, keys = self._spec.pop(key)
        task.cancel()
        self._dropped.append(task)
        for text in keys:
            reply = self._replies.pop(text, None)
            if reply is not None:
                reply.cancel()
                self.spec_stats["reflections_unused"] += 1
        self.spec_stats["dropped"] += 1

    async def _prefetch(self, plan: Plan, parent_prompt: str, keys: list[str]) -> None:
        """What _propose does for `plan`, minus the decisions: rollouts into the cache, the reflection
        reply kept for the proposal that asks for the same text."""
        try:
            entries = await self.evaluator.row_results(parent_prompt, "train", plan.rows)
            perfect = self.config.perfect_score
            if perfect is not None and all((s := row_score(row)) is not None and s >= perfect for row in entries):
                return
            if plan.kind == "merge":
                child = merged_prompt(self.state.candidates, plan.parent, plan.other or 0)
                if child is not None:
                    await self.evaluator.row_results(child, "train", plan.rows)
                return
            text = self._reflection_text(plan, parent_prompt, entries)
            if text is None:  # it does not fit the reflection model's context: the proposal says so
                return
            if text not in self._replies:
                reply = asyncio.ensure_future(self._call_reflection(text))
                reply.add_done_callback(lambda t: t.cancelled() or t.exception())  # read by whoever takes it
                self._replies[text] = reply
                keys.append(text)
            response = await asyncio.shield(self._replies[text])
            proposal = parse_reply(content_text(response.message), response.finish_reason)
            if proposal.prompt is not None and proposal.prompt != parent_prompt:
                await self.evaluator.row_results(proposal.prompt, "train", plan.rows)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed prefetch only means the proposal does the work itself
            logger.debug("prefetch of iteration %s stopped: %r", plan.iteration, exc)
