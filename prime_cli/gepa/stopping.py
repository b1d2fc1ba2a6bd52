"""When the GEPA search stops: one object per condition, each saying whether it holds and why.

The loop asks them before it launches a proposal, speculation asks them about a state it foresees,
a commit asks whether the reflection model has failed too often, and a completed run asks them why
it stopped before its budget: one place per condition, whoever asks.

The budget is planned, not only checked (BudgetSpent): -B is never passed, and each proposal is
launched with what its minibatches and the validation of a winning child could cost kept in reserve,
so that no child that wins its minibatch is left unvalidated; the engine's commit asks it how much a
winner's validation may spend (validation.py picks the rows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .config import GepaConfig
from .state import SearchState

MAX_IDLE_COMMITS = 20
"""Stop after this many proposals in a row that needed no new rollout: with deterministic models the
search can only repeat itself from there."""


@dataclass(frozen=True)
class SearchPoint:
    """What the stop conditions look at: the search as it stands, or as speculation foresees it."""

    used: int  # rollouts charged (foreseen: the most that can be charged by then)
    in_flight: int  # proposals launched and not yet committed
    idle_commits: int = 0
    fruitless_reflections: int = 0
    reflection_failures: int = 0  # in a row
    last_fruitless: str | None = None  # why the last fruitless reflection gave nothing
    last_failure: str = ""
    dry_edits: int = 0  # edit steps tried because proposals ran dry (engine.py), since the last acceptance

    @classmethod
    def of(cls, state: SearchState, used: int, in_flight: int = 0, last_fruitless: str | None = None,
           last_failure: str = "") -> SearchPoint:
        return cls(used, in_flight, state.idle_commits, state.fruitless_reflections,
                   state.consecutive_reflection_failures, last_fruitless, last_failure, state.dry_edits)

    def after_rejection(self, proposal_cost: int) -> SearchPoint:
        """One more proposal committed and rejected, at worst for going on: it paid for its whole minibatch
        and bought nothing new. Reflection counts stay as they are: foreseeing each rejection as fruitless
        would stop every prefetch at `max_reflection_failures` deep, in runs whose reflections all bear fruit."""
        return replace(self, used=self.used + proposal_cost, in_flight=self.in_flight - 1,
                       idle_commits=self.idle_commits + 1)

    def after_launch(self) -> SearchPoint:
        return replace(self, in_flight=self.in_flight + 1)


class BudgetSpent:
    """The budget cannot pay one more proposal. Never passed: every proposal in flight keeps in reserve what
    it may still charge, its minibatch rollouts and the validation of a winner on at least
    `min_validation_rows` rows, so a child that wins its minibatch is always validated, on every row the
    budget left pays for (validation.py). A proposal is launched only when the budget left pays for its own
    reserve beside theirs; beside the first, only when it could pay a whole validation pass for it and for
    each one in flight (so the search turns serial as the budget runs out). Both are planned with the
    nominal costs (each rollout new) against the spend committed so far, which cache hits keep lower.
    Running out is the search's normal end, so it gives no stop reason."""

    def __init__(self, max_calls: int, proposal_cost: int, validation_pass_cost: int,
                 min_validation_cost: int, minibatch_cost: int) -> None:
        self.max_calls, self.proposal_cost, self.minibatch_cost = max_calls, proposal_cost, minibatch_cost
        self.validation_pass_cost, self.min_validation_cost = validation_pass_cost, min_validation_cost

    def _room(self, point: SearchPoint) -> int:
        """What a new proposal leaves once its fresh minibatch, its validation and the reserves of those in
        flight are paid for (negative: it cannot be launched)."""
        validation = self.min_validation_cost if point.in_flight == 0 else self.validation_pass_cost
        reserved = point.in_flight * (self.proposal_cost + validation)
        return self.max_calls - point.used - reserved - self.minibatch_cost - validation

    def holds(self, point: SearchPoint) -> bool:
        return self._room(point) < 0

    def validation_allowance(self, point: SearchPoint) -> int:
        """Rollouts a winner committed now may charge for its validation: what is left once each proposal
        still in flight (`point.in_flight`, the winner's own not counted) has its reserve."""
        return self.max_calls - point.used - point.in_flight * (self.proposal_cost + self.min_validation_cost)

    def reason(self, point: SearchPoint) -> None:
        return None


class OnlyRepeats:
    """The last proposals needed no new rollout: everything they asked for was already known."""

    def holds(self, point: SearchPoint) -> bool:
        return point.idle_commits >= MAX_IDLE_COMMITS

    def reason(self, point: SearchPoint) -> str:
        return "the last proposals only repeated rollouts already made"


class ReflectionsExhausted:
    """`limit` reflections in a row gave nothing new to try while nothing was paid for: the search would only
    buy more reflection calls (SmolLM2 spends a minute on each)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def holds(self, point: SearchPoint) -> bool:
        return point.fruitless_reflections >= self.limit

    def reason(self, point: SearchPoint) -> str:
        last = f" (last: {point.last_fruitless})" if point.last_fruitless else ""
        tried = f", nor in {point.dry_edits} edit step(s) of the best prompt" if point.dry_edits else ""
        return (f"the reflection model gave no new prompt to try in {point.fruitless_reflections} proposals "
                f"in a row{tried}{last}, and their minibatch rollouts were all paid for already")


class ReflectionsFailing:
    """The reflection model failed `limit` times in a row: the run stops as failed (its candidates are kept)."""

    def __init__(self, limit: int, reflector: str) -> None:
        self.limit, self.reflector = limit, reflector

    def holds(self, point: SearchPoint) -> bool:
        return point.reflection_failures >= self.limit

    def reason(self, point: SearchPoint) -> str:
        return (f"the reflection model {self.reflector} failed {point.reflection_failures} times in a row "
                f"(last: {point.last_failure.removeprefix('reflection failed: ')})")


class StopConditions:
    """Every condition of one run. Those that end the search are asked before each launch, in the order a
    stop reason is looked for; failing reflections end the run as failed, at the commit that makes them
    too many (a resumed run tries the reflection model again)."""

    def __init__(self, config: GepaConfig) -> None:
        self.reflections_exhausted = ReflectionsExhausted(config.max_reflection_failures)
        self.only_repeats = OnlyRepeats()
        self.budget = BudgetSpent(config.max_calls, config.proposal_cost, config.validation_pass_cost,
                                  config.min_validation_cost, config.minibatch_cost)
        self.reflections_failing = ReflectionsFailing(config.max_reflection_failures, config.reflector)
        self.ending_the_search = (self.reflections_exhausted, self.only_repeats, self.budget)

    def allow_launch(self, point: SearchPoint) -> bool:
        return not any(condition.holds(point) for condition in self.ending_the_search)

    def stop_reason(self, point: SearchPoint) -> str | None:
        """Why a search stopped before its budget ran out (None when it did not)."""
        return next((condition.reason(point) for condition in self.ending_the_search if condition.holds(point)), None)
