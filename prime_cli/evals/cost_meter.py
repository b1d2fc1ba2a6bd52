"""An eval's spend as it runs: prices chosen at the start, tokens added per finished rollout, and the
`--max-cost` check made before each group of rollouts is launched.

The check is conservative: a group is launched only when the spend so far, plus the expected cost of
the rollouts in flight and of the group itself (the average finished rollout's cost, times 1.5), stays
within the cap. Until a first rollout has finished there is no average: one group runs alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from prime_cli.clients.errors import ClientConfigError
from prime_cli.results.cost import RoleTally, cost_record, judge_usages, row_cost, usd
from prime_cli.results.eval_schema import Rollout

SAFETY = 1.5  # rollouts vary: a group is expected to cost half as much again as the average one


def student_price(config: Any, specs: list[Any] | None = None) -> Any:
    """The evaluated model's Price (clients/pricing.py)."""
    from prime_cli.clients.command_flags import is_local_model
    from prime_cli.clients.pricing import Price, price_of_specs

    if config.local_model or (is_local_model(config.model) and not config.base_url):
        return Price(config.local_name or config.model, 0.0, 0.0, "free", "embedded model")
    if specs is None:
        from .endpoints import endpoint_specs

        try:
            specs = endpoint_specs(config)
        except ClientConfigError:
            specs = []
    return price_of_specs(config.model, specs, base_url=config.base_url, registry_path=config.endpoints_path)


def check_cost_cap(config: Any, env: Any) -> None:
    """--max-cost needs every price: refuse up front (one line) when the student's or a judge's is unknown."""
    if config.max_cost is None:
        return
    from prime_cli.clients.pricing import (
        judge_models,
        price_of_name,
        unknown_for_a_cap,
        unknown_price_refusal,
    )

    unknown = [p.model for p in [student_price(config), *(price_of_name(m, config.endpoints_path)
                                                         for m in judge_models(getattr(env, "rubric", None)))]
               if unknown_for_a_cap(p)]
    if unknown:
        raise ClientConfigError(unknown_price_refusal(config.max_cost, unknown, config.endpoints_path))


class CostMeter:
    def __init__(self, config: Any, student: Any) -> None:
        self.model = config.model
        self.registry = config.endpoints_path
        self.max_cost: float | None = config.max_cost
        self.prices: dict[str, dict[str, dict[str, Any]]] = {"student": {self.model: student.record()}, "judge": {}}
        self.tallies = {"student": RoleTally(), "judge": RoleTally()}
        self.tallies["student"].by_model[self.model] = [0, 0]
        self.spent = 0.0
        self.counted = 0  # rows whose cost is known
        self.paid, self.paid_spend = 0, 0.0  # rows that cost something: the average is theirs (an errored
        # row that sent no token costs $0 and says nothing about what the next rollout will cost)
        self.free = student.input_per_million == 0 and student.output_per_million == 0
        self.unknown = False
        self.cap_reached = False

    def add(self, row: Rollout) -> None:
        self.tallies["student"].add(self.model, row.get("token_usage"))
        for model, usage in judge_usages(row):
            if model not in self.prices["judge"]:
                from prime_cli.clients.pricing import price_of_name

                self.prices["judge"][str(model)] = price_of_name(str(model), self.registry).record()
            self.tallies["judge"].add(str(model), usage)
        cost = row_cost(row, self.prices, self.model)
        if cost is None:
            self.unknown = True
        else:
            self.spent += cost
            self.counted += 1
            if cost > 0:
                self.paid += 1
                self.paid_spend += cost

    def add_all(self, rows: Iterable[Rollout]) -> None:
        for row in rows:
            self.add(row)

    @property
    def shown_spend(self) -> float | None:
        """The spend for the progress line: None when unknown, or nothing is paid and there is no cap."""
        if self.unknown or (not self.spent and self.max_cost is None):
            return None
        return self.spent

    @property
    def average(self) -> float | None:
        """The average cost of a rollout that paid for tokens (None before the first)."""
        return self.paid_spend / self.paid if self.paid else None

    def allows(self, in_flight: int, width: int) -> bool:
        """Whether a group of `width` rollouts may start with `in_flight` rollouts running (under --max-cost)."""
        if self.max_cost is None:
            return True
        if self.unknown:  # a judge without prices turned up: the cap cannot be kept
            return False
        average = self.average
        if average is None:  # nothing paid yet: one group at a time (a free model never pays)
            return self.free or (in_flight == 0 and self.spent < self.max_cost)
        return self.spent + (in_flight + width) * average * SAFETY <= self.max_cost

    def stop(self) -> None:
        self.cap_reached = True

    def record(self) -> dict[str, Any]:
        return cost_record(self.tallies, self.prices, self.max_cost, self.cap_reached)

    def estimate(self, total: int, done: int) -> str | None:
        """`estimated $0.42 for 200 rollouts from the average of the first 8`, once an average exists."""
        average = self.average
        if average is None or total <= 0:
            return None
        whole = self.spent + max(0, total - done) * average
        return f"estimated {usd(whole)} for {total} rollouts from the average of the {self.paid} finished"

    def resume_cap(self, total: int, done: int) -> str:
        """`--max-cost X` for the resume command: what the rest would cost (with the margin), at least twice
        the old cap."""
        needed = self.spent + max(0, total - done) * (self.average or 0.0) * SAFETY
        return f"--max-cost {math.ceil(max(needed, (self.max_cost or 0.0) * 2) * 100) / 100:.2f}"

    def stop_line(self, resume: str | None) -> str:
        """The error line of a stop by the cap; `resume` already carries the higher cap (resume_cap)."""
        spent = usd(self.spent)
        if self.unknown:
            head = f"cost cap: a judge model without prices was used (spent {spent} known); the run stops"
        else:
            head = f"cost cap reached: spent {spent} of {usd(self.max_cost)}"
        if resume is None:
            return head + " (save the run with -s to resume it)"
        return f"{head}; resume with a higher cap: {resume}"


def judge_cost(rows: Iterable[Rollout], registry: str | None) -> dict[str, Any]:
    """The cost record of a rescore: its judge calls only (no student model was called)."""
    from prime_cli.clients.pricing import price_of_name

    tally = RoleTally()
    for row in rows:
        for model, usage in judge_usages(row):
            tally.add(str(model), usage)
    prices = {model: price_of_name(model, registry).record() for model in tally.by_model}
    return cost_record({"judge": tally}, {"judge": prices})
