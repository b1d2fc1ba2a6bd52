"""A run's spend as it runs, by role (student, judge, reflection), at the prices chosen when it starts,
and the `--max-cost` arithmetic that the eval runner and the GEPA search both keep to.

Rollouts (an eval row, or a GEPA rollout entry) bring the student's tokens and the judge calls made
inside them; reflection calls (GEPA) are counted one by one. A judge's price is looked up the first
time the judge is seen (`judge_price`, given by the engine: prices come from the clients layer).

The cap is conservative: more rollouts may start only while the spend so far, plus the expected cost
of the rollouts in flight and of the new ones (the average paid rollout's cost, times SAFETY), stays
within it. Before a rollout has paid there is no average: one group runs alone. A judge without
prices makes the spend unknown, and a cap cannot be kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .cost import RoleTally, cost_record, judge_usages, row_cost, usd

SAFETY = 1.5  # rollouts vary: a group is expected to cost half as much again as the average one
STUDENT, JUDGE, REFLECTION = "student", "judge", "reflection"


class Price(Protocol):
    """What the meter reads of a price (prime_cli.clients.pricing.Price)."""

    model: str
    input_per_million: float | None
    output_per_million: float | None

    def record(self) -> dict[str, Any]: ...


class RunCostMeter:
    """Tokens and dollars per role; `reflection` is given by the engines that call a reflection model."""

    def __init__(self, student: Price, max_cost: float | None,
                 judge_price: Callable[[str], dict[str, Any]], reflection: Price | None = None) -> None:
        self.max_cost = max_cost
        self.student_model = student.model
        self.reflection_model = reflection.model if reflection is not None else None
        self.judge_price = judge_price
        self.prices: dict[str, dict[str, dict[str, Any]]] = {STUDENT: {student.model: student.record()}, JUDGE: {}}
        self.tallies = {STUDENT: RoleTally(), JUDGE: RoleTally()}
        self.tallies[STUDENT].by_model[student.model] = [0, 0]
        if reflection is not None:
            self.prices[REFLECTION] = {reflection.model: reflection.record()}
            self.tallies[REFLECTION] = RoleTally()
            self.tallies[REFLECTION].by_model[reflection.model] = [0, 0]
        self.rollout_spend = 0.0
        self.paid, self.paid_spend = 0, 0.0  # rollouts that cost something: the average is theirs (an errored
        # rollout that sent no token costs $0 and says nothing about what the next one will cost)
        self.free = student.input_per_million == 0 and student.output_per_million == 0
        self.unknown = False
        self.cap_reached = False
        self.reflection_calls = 0
        self.reflections_in_flight = 0

    # -- adding up -----------------------------------------------------------------------------------

    def add_rollout(self, row: Mapping[str, Any]) -> None:
        """An eval row (`token_usage`) or a GEPA rollout entry (`usage`), with its `judge_usage`."""
        self.tallies[STUDENT].add(self.student_model, row.get("token_usage") if "token_usage" in row else row.get("usage"))
        for model, usage in judge_usages(row):
            if model not in self.prices[JUDGE]:
                self.prices[JUDGE][str(model)] = self.judge_price(str(model))
            self.tallies[JUDGE].add(str(model), usage)
        cost = row_cost(row, self.prices, self.student_model)
        if cost is None:
            self.unknown = True
        else:
            self.rollout_spend += cost
            if cost > 0:
                self.paid += 1
                self.paid_spend += cost

    def add_reflection(self, usage: Any) -> None:
        """One reflection call's usage (a Usage or its dict)."""
        assert self.reflection_model is not None, "this meter has no reflection role"
        self.reflection_calls += 1
        self.tallies[REFLECTION].add(self.reflection_model, usage.as_dict() if hasattr(usage, "as_dict") else usage)

    # -- what it adds up to --------------------------------------------------------------------------

    @property
    def reflection_spend(self) -> float:
        if REFLECTION not in self.tallies:
            return 0.0
        return cost_record({REFLECTION: self.tallies[REFLECTION]}, self.prices)["total_usd"] or 0.0

    @property
    def spent(self) -> float:
        return self.rollout_spend + self.reflection_spend

    @property
    def shown_spend(self) -> float | None:
        """The spend for progress lines: None when unknown, or nothing is paid and there is no cap."""
        if self.unknown or (not self.spent and self.max_cost is None):
            return None
        return self.spent

    @property
    def average(self) -> float | None:
        """The average cost of a rollout that paid for tokens (None before the first)."""
        return self.paid_spend / self.paid if self.paid else None

    @property
    def reflection_average(self) -> float | None:
        return self.reflection_spend / self.reflection_calls if self.reflection_calls else None

    def record(self) -> dict[str, Any]:
        """The run's `cost` record (results/cost.py); the reflection role keeps its count of calls."""
        record = cost_record(self.tallies, self.prices, self.max_cost, self.cap_reached)
        if REFLECTION in record["roles"]:
            record["roles"][REFLECTION]["calls"] = self.reflection_calls  # a resumed run's average call
        return record

    # -- the cap -------------------------------------------------------------------------------------

    def fits(self, in_flight: int, rollouts: int, extra: float = 0.0) -> bool:
        """Whether `rollouts` more may start with `in_flight` running, `extra` dollars expected elsewhere
        and the reflection calls in flight, under the cap (which must be set)."""
        assert self.max_cost is not None
        if self.unknown:  # a judge without prices turned up: the cap cannot be kept
            return False
        extra += self.reflections_in_flight * (self.reflection_average or 0.0) * SAFETY
        average = self.average
        if average is None:  # nothing paid yet: one group at a time (a free model never pays)
            return (self.free or in_flight == 0) and self.spent + extra < self.max_cost
        return self.spent + extra + (in_flight + rollouts) * average * SAFETY <= self.max_cost

    def raised_cap(self, remaining: int) -> float:
        """A cap for resuming: what the `remaining` rollouts would cost (with the margin) on top of the
        spend, and at least twice the old cap; rounded up to the cent."""
        needed = self.spent + max(0, remaining) * (self.average or 0.0) * SAFETY
        return math.ceil(max(needed, 2 * (self.max_cost or 0.0)) * 100) / 100

    def stop_head(self) -> str:
        """The first words of the error line of a stop by the cap."""
        if self.unknown:
            return f"cost cap: a judge model without prices was used (spent {usd(self.spent)} known); the run stops"
        return f"cost cap reached: spent {usd(self.spent)} of {usd(self.max_cost)}"
