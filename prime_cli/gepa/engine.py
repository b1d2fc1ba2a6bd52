"""The GEPA search loop: proposals run concurrently, commit in order.

Proposal i is planned (parent drawn from the Pareto front, next minibatch) right after proposal
i - P is committed, and runs at once: parent on the minibatch, reflection, child on the
minibatch. Commits happen strictly in iteration order: charge the budget, accept the child if it
beats its parent on the same minibatch, score an accepted child on the validation set, save.
Every decision is made at a commit from committed data only, so the run's choices do not depend
on timing, and a run resumed from state.json makes exactly the choices an uninterrupted run
makes. With P = 1 this is GEPA's serial loop. A proposal is a reflection, an edit step or a merge
(planner.py); the parent and the child are compared on the fresh minibatch; a winner is validated on
the first half of the validation rows, and on the rest unless it is below its parent there
(validating.py). When the search has ended, the final pick (picking.py) chooses the best.

Budget: never passed, and a child that wins its minibatch is always validated. Every proposal in
flight keeps in reserve its minibatch rollouts and the validation of a winner on at least 10 rows
(stopping.BudgetSpent); a proposal is launched only when the budget left pays for its reserve
beside theirs (beside the first, only when it could pay a whole validation pass for each), and a
winner is validated on every validation row that what is left after those reserves pays for: all
of them, or late in the budget the first rows of one seeded order (validation.py), its other rows
left unscored. Costs are planned nominally (every rollout new) against the spend committed so far.

Work that decides nothing is overlapped with the search, never reordered: the seed's validation
pass runs while the first proposals (whose parent can only be the seed, and whose RNG draws do not
depend on its scores) evaluate their minibatch and reflect, and is awaited before the first
commit; with --num-test, the seed's held-out test pass runs in the background from the start, in
rollout slots the search leaves idle. Neither changes a choice, a charge or a saved state.

Speculation (--speculate S, off by default): see speculation.py.

Ctrl-C (runs/interrupt.py, as an eval takes it): the first press drains (`drain`): no proposal is launched
after it, and the prefetches are dropped; the proposals in flight run on and commit in order, and the
plans the loop makes at those commits are saved as pending without being run, so that a resumed run
launches them and makes exactly the choices of an uninterrupted one. Pressed during the test passes, it
lets them finish. Either way the run ends cancelled and resumable. The second press cancels at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prime_cli.runs.status import RunStatus
from prime_cli.runs.tasks import gather_or_cancel

from .config import GepaConfig
from .context_window import ContextWindow
from .cost import CostCapReached
from .evaluator import (
    BACKGROUND,
    VALIDATION,
    EndpointAborted,
    Evaluator,
    Ledger,
)
from .picking import FinalPick
from .planner import Planner
from .proposal import ProposalResult, minibatch_verdict
from .proposing import Proposer, ReflectionAborted
from .run_dir import GepaRunDir, now_iso
from .scored import (
    RowScore,
    errored_record,
    mean_scored,
)
from .speculation import Prefetcher
from .stages import Stages
from .state import Candidate, Plan, SearchState
from .stopping import SearchPoint, StopConditions
from .uncertainty import intervals_record
from .validating import Validator
from .validation import validation_order

if TYPE_CHECKING:
    from prime_cli.clients.pool import ClientPool

    from .display import GepaDisplay

logger = logging.getLogger("prime_cli.gepa")

MAX_DRY_EDITS = 1
"""Edit steps tried when proposals run dry, before the search stops (reset by an accepted child)."""


@dataclass
class Outcome:
    status: RunStatus
    state: SearchState
    total_metric_calls: int
    error: str | None = None
    seed_test_score: float | None = None
    best_test_score: float | None = None
    seed_test_scores: list[RowScore] | None = None  # per test row, for the paired comparison
    best_test_scores: list[RowScore] | None = None
    test_metric_calls: int = 0
    stop_reason: str | None = None
    """Why a completed search stopped before its budget (None when the budget ran out)."""
    pick: dict[str, Any] | None = None
    """How the best was chosen (picking.py), when the search completed."""
    errored_rollouts: dict[str, int] = field(default_factory=dict)
    """scored.errored_record of the rollouts the run used: errored ones are counted and left out."""
    cost: dict[str, Any] | None = None  # gepa/cost.py's record, set by the caller
    stages: dict[str, Any] | None = None  # gepa/stages.py's record (where the wall time went), set by the caller
    resume_max_cost: float | None = None  # stopped by --max-cost: the higher cap its resume command carries

    @property
    def best(self) -> Candidate:
        return self.state.best()


class GepaEngine:
    """The commit loop (the module's docstring). It owns the proposals in flight and the commits; what to
    propose next is the planner's, running one is the proposer's, validating a winner the validator's,
    and prefetching the prefetcher's, each over the search state's committed data."""

    def __init__(self, config: GepaConfig, evaluator: Evaluator, state: SearchState, reflector: ClientPool,
                 seed_prompt: str, *, run: GepaRunDir | None = None, display: GepaDisplay | None = None,
                 metric_names: list[str] | None = None,
                 on_commit: Callable[[dict[str, Any]], None] | None = None, stages: Stages | None = None,
                 window: ContextWindow | None = None) -> None:
        self.config = config
        # the reflection model's context (context_window.py): reflection prompts are fitted to it
        self.window = window or ContextWindow(config.reflector, None, config.reflection_max_tokens())
        self.stages = stages or Stages(from_process_start=False)
        self.evaluator = evaluator
        self.state = state
        self.ledger = Ledger(state.charged)
        self.seed_prompt = seed_prompt
        self.run_dir = run
        self.display = display
        self.on_commit = on_commit
        self.stops = StopConditions(config)
        self.num_val = len(evaluator.splits["val"])
        self.proposer = Proposer(config, evaluator, reflector, state.candidates, self._prompt, self.window,
                                 metric_names or [], display)
        self.planner = Planner.of(state, config, seed_prompt, self.num_val, evaluator.r, self.proposer.train_scores)
        self.validator = Validator(config, evaluator, self.ledger, state.candidates,
                                   validation_order(self.num_val, config.seed), run)
        self.prefetcher = Prefetcher(config, evaluator, self.stops, self.proposer, state.candidates)
        self._tasks: dict[int, asyncio.Task] = {}  # the proposals in flight, by iteration
        self._plans: dict[int, Plan] = {}  # the plans not committed yet: running, or after a Ctrl-C saved for resume
        self._background: list[asyncio.Future] = []
        self._seed_test: asyncio.Future | None = None
        self._last_fruitless: str | None = None  # why the last fruitless reflection gave nothing
        self.draining = False  # the first Ctrl-C came (drain)
        self._testing = False  # the test passes run
        self._test_keys: list[str] = []  # the test passes' rollouts, once scored

    # -- public ------------------------------------------------------------------------------------

    async def run(self) -> Outcome:
        status, error, searched, pick = RunStatus.COMPLETED, None, False, None
        self.stages.begin("search_s")
        try:
            seed_rows = None if self.state.candidates else self._charge_seed()
            if seed_rows is not None:
                self.stages.begin("seed_validation_s")
            for plan in self.state.pending:
                self._plans[plan.iteration] = plan
                self._launch(plan)
            self._plan_more()
            self._speculate()
            # started after the proposals, so that their minibatches are the first rollouts sent
            seed = None if seed_rows is None else self._start_seed(seed_rows)
            self._start_seed_test()
            if seed is not None:
                if self._tasks:
                    await asyncio.wait([seed, self._tasks[min(self._tasks)]], return_when=asyncio.FIRST_COMPLETED)
                # the first commit needs the seed: what is left of its pass becomes urgent
                await self.evaluator.row_results(self.seed_prompt, "val", list(range(self.num_val)))
                await seed
            self._save()
            while self._tasks:
                iteration = min(self._tasks)
                result = await self._tasks[iteration]
                del self._tasks[iteration], self._plans[iteration]
                line = await self._commit(result)
                self._plan_more()
                self._speculate()
                self._save()
                self._show(line)
                if self.on_commit is not None:
                    self.on_commit(line)
            searched = not self.draining
            if not self.draining:
                pick = await self._pick()
            if self.draining:  # a Ctrl-C before or during the pick: no test pass
                status = RunStatus.CANCELLED
        except (KeyboardInterrupt, asyncio.CancelledError):
            status = RunStatus.CANCELLED
        except (ReflectionAborted, EndpointAborted, CostCapReached) as exc:  # a cost cap: resumable as a Ctrl-C
            status, error = RunStatus.CANCELLED if isinstance(exc, CostCapReached) else RunStatus.FAILED, str(exc)
        except Exception as exc:  # noqa: BLE001 - any fatal error still leaves a consistent, resumable run
            logger.exception("the GEPA run failed")
            status, error = RunStatus.FAILED, f"{type(exc).__name__}: {exc} (details in gepa.log)"
        finally:
            self.stages.end("search_s")
            await self._cancel_all(background=not searched)
        outcome = Outcome(status, self.state, self.ledger.used, error,
                          stop_reason=self._stop_reason() if status == RunStatus.COMPLETED else None,
                          pick=pick if status == RunStatus.COMPLETED else None)
        try:
            if status == RunStatus.COMPLETED and self.config.num_test > 0:
                self.stages.begin("test_s")
                self._testing = True
                await self._score_test(outcome)
        except CostCapReached as exc:
            outcome.status, outcome.error = RunStatus.CANCELLED, str(exc)
        except (KeyboardInterrupt, asyncio.CancelledError):  # the second Ctrl-C: the search is saved, its test scores not
            outcome.status = RunStatus.CANCELLED
        finally:
            self.stages.end("test_s")
            await self._cancel_all(background=True)
            await self.evaluator.cancel_queued()
        if self.draining:  # pressed during the test passes: they finished, and the run is cancelled as an eval's is
            outcome.status, outcome.stop_reason = RunStatus.CANCELLED, None
        self.stages.begin("finish_s")
        self._finish(outcome)
        return outcome

    def drain(self) -> str:
        """The first Ctrl-C (the module's docstring): launch nothing more. Returns what the run waits for."""
        self.draining = True
        self.prefetcher.drop_all()
        if self._tasks:
            return f"{len(self._tasks)} proposal(s) in flight to finish and commit"
        return "the test passes to finish" if self._testing else "the run to be saved"

    # -- steps ---------------------------------------------------------------------------------------

    def _charge_seed(self) -> list[int]:
        """Charge the seed's validation pass first, as the serial loop does (its keys are known)."""
        rows = list(range(self.num_val))
        self.ledger.charge(self.evaluator.keys(self.seed_prompt, "val", rows))
        return rows

    def _start_seed(self, rows: list[int]) -> asyncio.Future:
        """Score the seed on the validation rows in the background; the candidate exists once this is
        awaited, before the first commit."""
        discovered = self.ledger.used

        async def score() -> None:
            scores = await self.evaluator.scores(self.seed_prompt, "val", rows, priority=VALIDATION)
            self.state.candidates.append(Candidate(0, self.seed_prompt, None, scores, 0, discovered,
                                                   self.evaluator.errored(self.seed_prompt, "val", rows), len(rows)))
            self.stages.end("seed_validation_s")
            if self.run_dir is not None:
                self.run_dir.save_candidate(self.state.candidates[0])

        task = asyncio.ensure_future(score())
        self._background.append(task)
        return task

    def _start_seed_test(self) -> None:
        """The seed's held-out test pass, at background priority (it only decides a reported number)."""
        if self.config.num_test <= 0:
            return
        rows = list(range(len(self.evaluator.splits["test"])))
        self._seed_test = asyncio.ensure_future(self.evaluator.scores(self._prompt(0), "test", rows, priority=BACKGROUND))
        self._background.append(self._seed_test)

    def _prompt(self, idx: int) -> str:
        return self.planner.prompt_of(self.state.candidates, idx)

    def _point(self, last_failure: str = "") -> SearchPoint:
        # the plans not yet committed: those running, and after a Ctrl-C those saved to run on resume
        return SearchPoint.of(self.state, self.ledger.used, len(self._plans), self._last_fruitless, last_failure)

    def _stop_reason(self) -> str | None:
        return self.stops.stop_reason(self._point())

    def _can_launch(self) -> bool:
        return self.stops.allow_launch(self._point())

    def _plan_more(self) -> None:
        state = self.state
        while len(self._plans) < self.config.parallel_proposals:
            dry = not self._can_launch()
            if dry and not self._edit_before_stopping():
                break
            state.last_planned += 1
            plan = self.planner.next_plan(state.last_planned, state.candidates, self.ledger.charged, dry)
            state.dry_edits += dry
            self._plans[plan.iteration] = plan
            if not self.draining:
                self._launch(plan)

    def _edit_before_stopping(self) -> bool:
        """Proposals ran dry (not the budget): one edit step from the best before the search gives up on it."""
        point = self._point()
        return (bool(self.state.candidates) and self.state.dry_edits < MAX_DRY_EDITS
                and not self.stops.budget.holds(point) and not self._plans)

    def _speculate(self) -> None:
        if self.draining:
            return
        self.prefetcher.update(self.planner, self._plans.values(), self.ledger.charged, self._point(),
                               self.state.last_planned)

    def _launch(self, plan: Plan) -> None:
        self.prefetcher.adopt(plan)
        self._tasks[plan.iteration] = asyncio.ensure_future(self.proposer.propose(plan, self.prefetcher.take_reply))

    async def _commit(self, result: ProposalResult) -> dict[str, Any]:
        plan, state = result.plan, self.state
        spent = self.ledger.charge(result.keys)
        if result.reflected:
            state.consecutive_reflection_failures = state.consecutive_reflection_failures + 1 if result.reflection_failed else 0
        accepted, child_idx, reason, val_cut = False, None, result.reason, None
        if result.child_scores is not None:
            duplicate = next((c.idx for c in state.candidates if c.prompt == result.child_prompt), None)
            if duplicate is not None:
                reason = f"same prompt as candidate {duplicate}"
            elif verdict := minibatch_verdict(result, self.evaluator.r):
                reason = verdict
            else:
                allowance = self.stops.budget.validation_allowance(self._point())
                child_idx, reason, val_cut = await self.validator.validate(result, allowance)
                accepted = child_idx is not None
                if accepted:  # the final pick of the run this one resumes no longer stands
                    state.picked = None
        state.last_committed = plan.iteration
        if accepted:
            state.dry_edits = 0
        if spent or accepted:
            state.idle_commits = state.fruitless_reflections = 0
        else:
            state.idle_commits += 1
            if result.reflected and plan.kind != "edit":  # the limit is on reflective proposals (edit steps are extra)
                state.fruitless_reflections += 1
                self._last_fruitless = reason
        line = {"iteration": plan.iteration, "kind": plan.kind, "parent_idx": plan.parent, "other_idx": plan.other,
                "minibatch_rows": plan.rows,
                "parent_minibatch_scores": result.parent_scores,
                "child_minibatch_scores": result.child_scores or [], "accepted": accepted, "reason": reason,
                "parent_minibatch_errored": result.parent_errored, "child_minibatch_errored": result.child_errored,
                "child_idx": child_idx, "child_prompt": result.child_prompt, "metric_calls": self.ledger.used,
                "child_val_rows_run": None if child_idx is None else state.candidates[child_idx].val_rows_run,
                "child_val_cut": val_cut,
                "time_s": round(time.monotonic() - result.started, 3)}
        if result.reflected:
            line["reflection_reply"] = result.reflection_reply
            line["reflection_truncated"] = result.reflection_truncated
        if self.run_dir is not None:
            self.run_dir.save_iteration(line)
        point = self._point(last_failure=result.reason)
        if self.stops.reflections_failing.holds(point):
            self._save()
            raise ReflectionAborted(f"{self.stops.reflections_failing.reason(point)}; the run stopped and kept "
                                    f"its {len(state.candidates)} candidate(s)")
        return line

    async def _pick(self) -> dict[str, Any] | None:
        """The final pick (picking.py), saved with the state. Its record, or None without candidates."""
        if not self.state.candidates:
            return None
        self.state.picked, record = await FinalPick(self.evaluator, self.ledger, self.state.candidates,
                                                    self.config.max_calls, self.validator.validation_order).pick()
        self._save()
        return record

    async def _score_test(self, outcome: Outcome) -> None:
        """The seed's and the best's test passes. The best's starts here, when the last commit has decided
        it, and not earlier on a guess: until then any proposal in flight may replace it, and a test pass
        of a prompt that is then replaced is paid for and thrown away (in the benchmark the last child is
        often the final best)."""
        rows = list(range(len(self.evaluator.splits["test"])))
        seed, best = self.state.candidates[0].prompt, outcome.best.prompt
        # the seed's pass began in the background; what is left of it now runs at full priority
        seed_scores, best_scores = await gather_or_cancel(
            self.evaluator.scores(seed, "test", rows),
            self.evaluator.scores(best, "test", rows) if best != seed else asyncio.sleep(0))
        if best == seed:
            best_scores = seed_scores
        outcome.seed_test_score, outcome.best_test_score = mean_scored(seed_scores), mean_scored(best_scores)
        outcome.seed_test_scores, outcome.best_test_scores = list(seed_scores), list(best_scores)
        self._test_keys = list(dict.fromkeys(self.evaluator.keys(seed, "test", rows) + self.evaluator.keys(best, "test", rows)))
        outcome.test_metric_calls = len(self._test_keys)

    async def _cancel_all(self, background: bool = False) -> None:
        tasks = list(self._tasks.values())
        tasks += self.prefetcher.stop()
        self._tasks.clear()
        if background:
            tasks += [t for t in self._background if not t.done()]
            for done in (t for t in self._background if t.done() and not t.cancelled()):
                done.exception()  # retrieved: the error already ended the run (no "never retrieved" noise)
            self._background.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- saving and showing -------------------------------------------------------------------------

    def _save(self) -> None:
        """Save after a commit: the state then holds only committed data and the in-flight plans."""
        self.state.pending = [self._plans[i] for i in sorted(self._plans)]
        self.state.charged = sorted(self.ledger.charged)
        if self.run_dir is not None and self.state.candidates:
            self.run_dir.save_progress(self.state, self.ledger.charged)

    def _show(self, line: dict[str, Any]) -> None:
        if self.display is not None:
            best = self.state.best()
            self.display.update(used=self.ledger.used, max_calls=self.config.max_calls, line=line, num_val=self.num_val,
                                candidates=len(self.state.candidates), best_idx=best.idx, best_score=self.state.score_of(best),
                                seed_score=self.state.candidates[0].val_mean, in_flight=len(self._tasks))

    def _finish(self, outcome: Outcome) -> None:
        cache = self.evaluator.cache
        outcome.errored_rollouts = errored_record(cache.get(key) for key in [*sorted(self.ledger.charged), *self._test_keys]
                                                  if key in cache)
        if self.run_dir is None:
            return
        if not self.state.candidates:  # stopped during the seed's pass: the files of save_start stand
            self.run_dir.write_metadata(status=outcome.status, completed_at=now_iso(), error=outcome.error)
            return
        if outcome.status == RunStatus.COMPLETED:
            self._save()
        else:  # interrupted, maybe mid-commit: state.json keeps the last committed iteration
            outcome.total_metric_calls = len(self.state.charged)
        if self.config.speculative_proposals > 0:
            charged = self.ledger.charged
            unused = sum(1 for key in self.evaluator.cache.results if not key.startswith("test/") and key not in charged)
            self.run_dir.write_metadata(speculation={**self.prefetcher.stats, "rollouts_uncharged": unused})
        best, seed = self.state.best(), self.state.candidates[0]
        self.run_dir.write_metadata(status=outcome.status, completed_at=now_iso(),
                                    errored_rollouts=outcome.errored_rollouts,
                                    intervals=intervals_record(seed.val_scores, best.val_scores,
                                                               outcome.seed_test_scores, outcome.best_test_scores),
                                    total_metric_calls=outcome.total_metric_calls,
                                    seed_test_score=outcome.seed_test_score, best_test_score=outcome.best_test_score,
                                    test_metric_calls=outcome.test_metric_calls, error=outcome.error,
                                    stop_reason=outcome.stop_reason,
                                    # a resume that ended early keeps the pick that still stands
                                    **({"pick": outcome.pick} if outcome.pick or self.state.picked is None else {}))
