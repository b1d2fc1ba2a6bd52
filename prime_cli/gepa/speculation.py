"""Speculative prefetching for the GEPA loop: the Prefetcher.

Speculation (--speculate S, off by default): the next S proposals the loop would plan if every
proposal in flight were rejected (a fork of the planner, planning from the committed candidates) are
prefetched: their parent's minibatch rollouts go to the cache, their reflection call is made and kept
by its exact prompt text, and their child's minibatch is scored. The loop itself is unchanged: it
plans from committed data only and charges what it uses, so when its plan matches a prefetched one it
finds that work done (`adopt`, `take_reply`), and when it does not (a proposal was accepted and the
parent drawn differs) the prefetch is dropped. Choices, charges and saved states are those of the run
without speculation; the price is model calls that are never used (counted in metadata.json under
"speculation").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from prime_cli.envs.messages import content_text

from .config import GepaConfig
from .evaluator import Evaluator
from .instructions import merged_prompt
from .planner import Planner
from .proposing import Proposer
from .reflection import parse_reply
from .scored import row_score
from .state import Candidate, Plan
from .stopping import SearchPoint, StopConditions

logger = logging.getLogger("prime_cli.gepa")


class Prefetcher:
    """Speculation's state: the prefetches in flight, the reflection replies they made ahead, and the
    counts metadata.json reports. It reads the search's committed data and never changes a choice."""

    def __init__(self, config: GepaConfig, evaluator: Evaluator, stops: StopConditions, proposer: Proposer,
                 candidates: list[Candidate]) -> None:
        self.config, self.evaluator, self.stops = config, evaluator, stops
        self.proposer, self.candidates = proposer, candidates
        self._replies: dict[str, asyncio.Task] = {}  # reflection calls made ahead, by prompt text
        # prefetches by (iteration, parent): plan, task, the reflection texts it asked for
        self._spec: dict[tuple[int, int], tuple[Plan, asyncio.Task, list[str]]] = {}
        self._dropped: list[asyncio.Task] = []
        self.stats = {"proposals": 0, "used": 0, "dropped": 0, "reflections_unused": 0}

    def _prompt(self, planner: Planner, idx: int) -> str:
        return planner.prompt_of(self.candidates, idx)

    def hypothetical_plans(self, planner: Planner, in_flight: Iterable[Plan], charged: Iterable[str],
                           point: SearchPoint, last_planned: int) -> list[Plan]:
        """The next plans the loop makes if every proposal in flight is rejected, as far as the budget
        surely lets it make them: each comes right after one more commit, which spends at most one
        proposal's rollouts."""
        ahead = planner.fork()
        plans: list[Plan] = []
        iteration = last_planned
        # a rejected proposal charges its parent's rows: the rows the plans that follow show its reflection
        charged = set(charged)
        for plan in in_flight:
            charged.update(self.evaluator.keys(self._prompt(planner, plan.parent), "train", plan.rows))
        for _ in range(self.config.speculative_proposals):
            if point.in_flight == 0:  # the loop plans now, not after a commit: nothing to foresee
                break
            point = point.after_rejection(self.config.proposal_cost)
            if not self.stops.allow_launch(point):
                break
            iteration += 1
            plan = ahead.next_plan(iteration, self.candidates, charged)
            plans.append(plan)
            charged.update(self.evaluator.keys(self._prompt(planner, plan.parent), "train", plan.rows))
            point = point.after_launch()
        return plans

    def update(self, planner: Planner, in_flight: Iterable[Plan], charged: Iterable[str], point: SearchPoint,
               last_planned: int) -> None:
        """Start the prefetches the current state foresees; drop those it no longer does."""
        if self.config.speculative_proposals <= 0:
            return
        wanted = {(plan.iteration, plan.parent): plan
                  for plan in self.hypothetical_plans(planner, in_flight, charged, point, last_planned)}
        for key, (plan, _task, _keys) in list(self._spec.items()):
            if wanted.get(key) != plan:
                self._drop(key)
        for plan in wanted.values():
            self._spawn(plan, self._prompt(planner, plan.parent))

    def _spawn(self, plan: Plan, prompt: str) -> None:
        key = (plan.iteration, plan.parent)
        if key not in self._spec:
            keys: list[str] = []
            self._spec[key] = (plan, asyncio.ensure_future(self._prefetch(plan, prompt, keys)), keys)
            self.stats["proposals"] += 1

    def adopt(self, plan: Plan) -> None:
        """The loop plans `plan` for real: a matching prefetch has done (part of) its work; stop it and
        leave its reflection reply for the proposal to take. Other prefetches of that iteration go."""
        for key in [k for k in self._spec if k[0] == plan.iteration]:
            if self._spec[key][0] != plan:
                self._drop(key)
                continue
            task = self._spec.pop(key)[1]
            task.cancel()  # its rollouts run on (shared with the proposal), and so does its reflection call
            self._dropped.append(task)
            self.stats["used"] += 1

    def take_reply(self, text: str) -> asyncio.Task | None:
        """The reflection call a prefetch made for this exact prompt text (once), or None."""
        return self._replies.pop(text, None)

    def _drop(self, key: tuple[int, int]) -> None:
        _plan, task, keys = self._spec.pop(key)
        task.cancel()
        self._dropped.append(task)
        for text in keys:
            reply = self._replies.pop(text, None)
            if reply is not None:
                reply.cancel()
                self.stats["reflections_unused"] += 1
        self.stats["dropped"] += 1

    def drop_all(self) -> None:
        """Drop every prefetch not adopted (a Ctrl-C); the replies adopted ones asked for stay for their
        proposals to take. stop() awaits what this cancelled."""
        for key in list(self._spec):
            self._drop(key)

    def stop(self) -> list[asyncio.Task]:
        """Drop every prefetch; the tasks still to cancel and await (the replies nobody took, then the
        prefetches)."""
        self.drop_all()
        tasks: list[asyncio.Task] = list(self._replies.values()) + self._dropped
        self.stats["reflections_unused"] += len(self._replies)
        self._replies.clear()
        self._dropped = []
        return tasks

    async def _prefetch(self, plan: Plan, parent_prompt: str, keys: list[str]) -> None:
        """What Proposer.propose does for `plan`, minus the decisions: rollouts into the cache, the reflection
        reply kept for the proposal that asks for the same text."""
        try:
            entries = await self.evaluator.row_results(parent_prompt, "train", plan.rows)
            perfect = self.config.perfect_score
            if perfect is not None and all((s := row_score(row)) is not None and s >= perfect for row in entries):
                return
            if plan.kind == "merge":
                child = merged_prompt(self.candidates, plan.parent, plan.other or 0)
                if child is not None:
                    await self.evaluator.row_results(child, "train", plan.rows)
                return
            text = self.proposer.reflection_text(plan, parent_prompt, entries)
            if text is None:  # it does not fit the reflection model's context: the proposal says so
                return
            if text not in self._replies:
                reply = asyncio.ensure_future(self.proposer.call_reflection(text))
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
