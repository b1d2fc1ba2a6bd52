"""An eval's spend as it runs: prices chosen at the start, tokens added per finished rollout, and the
`--max-cost` check made before each group of rollouts is launched.

The tally and the cap's arithmetic are the meter every engine shares (results/cost_meter.py): a group is
launched only when the spend so far, plus the expected cost of the rollouts in flight and of the group
itself, stays within the cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prime_cli.clients.cost_cap import judge_price_records, judge_prices, refuse_unknown_prices
from prime_cli.clients.errors import ClientConfigError
from prime_cli.records.eval_run import Rollout
from prime_cli.results.cost import RoleTally, cost_record, judge_usages, usd
from prime_cli.results.cost_meter import RunCostMeter


def student_price(config: Any, specs: list[Any] | None = None) -> Any:
    """The evaluated model's Price (clients/pricing.py)."""
    from prime_cli.clients.pricing import Price, price_of_specs  # lazy: already loaded

    if config.served_local or config.wants_builtin():
        return Price(config.builtin_name or config.model, 0.0, 0.0, "free", "embedded model")
    if specs is None:
        from .endpoints import endpoint_specs  # lazy: start-up

        try:
            specs = endpoint_specs(config)
        except ClientConfigError:
            specs = []
    return price_of_specs(config.model, specs, base_url=config.base_url, registry_path=config.endpoints_path)


def check_cost_cap(config: Any, env: Any) -> None:
    """--max-cost needs every price: refuse up front (one line) when the student's or a judge's is unknown."""
    if config.max_cost is None:
        return
    refuse_unknown_prices(config.max_cost, [student_price(config), *judge_prices(env, config.endpoints_path)],
                          config.endpoints_path)


class CostMeter(RunCostMeter):
    """The eval's meter: the student and its judges; the runner asks `allows` before each group."""

    def __init__(self, config: Any, student: Any) -> None:
        super().__init__(student, config.max_cost, judge_price_records(config.endpoints_path))

    def add(self, row: Rollout) -> None:
        self.add_rollout(row)

    def add_all(self, rows: Iterable[Rollout]) -> None:
        for row in rows:
            self.add_rollout(row)

    def allows(self, in_flight: int, width: int) -> bool:
        """Whether a group of `width` rollouts may start with `in_flight` rollouts running (under --max-cost)."""
        return self.max_cost is None or self.fits(in_flight, width)

    def stop(self) -> None:
        self.cap_reached = True

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
        return f"--max-cost {self.raised_cap(total - done):.2f}"

    def stop_line(self, resume: str | None) -> str:
        """The error line of a stop by the cap; `resume` already carries the higher cap (resume_cap)."""
        if resume is None:
            return self.stop_head() + " (save the run with -s to resume it)"
        return f"{self.stop_head()}; resume with a higher cap: {resume}"


def judge_cost(rows: Iterable[Rollout], registry: str | None) -> dict[str, Any]:
    """The cost record of a rescore: its judge calls only (no student model was called)."""
    from prime_cli.clients.pricing import price_of_name  # lazy: already loaded

    tally = RoleTally()
    for row in rows:
        for model, usage in judge_usages(row):
            tally.add(str(model), usage)
    prices = {model: price_of_name(model, registry).record() for model in tally.by_model}
    return cost_record({"judge": tally}, {"judge": prices})
