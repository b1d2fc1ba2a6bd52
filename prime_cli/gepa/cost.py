"""A GEPA run's dollar spend and `--max-cost`: every student rollout it ran (seed validation,
minibatches, validation passes, test rows, prefetches), the judge calls inside them, and the reflection
calls, at the prices chosen when the run starts.

Rollout tokens live in rollouts.jsonl (each entry's `usage` and `judge_usage`), so a resumed run counts
its earlier rollouts again from there; reflection tokens are kept in metadata.json `cost`, rewritten
after each reflection call.

The cap is checked before a group of rollouts is sent (`admit`: the spend so far plus the expected cost
of the rollouts in flight and of this group, at the average finished rollout's cost times 1.5, must stay
within it; before any rollout has finished, one group runs alone) and before a reflection call (its
expected cost is the average reflection call's). Past the cap, CostCapReached stops the search.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from typing import Any

from prime_cli.clients.errors import ClientConfigError
from prime_cli.results.cost import RoleTally, cost_record, judge_usages, row_cost, usd

SAFETY = 1.5


class CostCapReached(Exception):
    """The next request would take the run past --max-cost."""


async def metered(meter: GepaCostMeter | None, call: Any) -> Any:
    """Await a reflection call (a coroutine) if the cap allows it, and count its tokens."""
    if meter is None:
        return await call
    try:
        meter.check_reflection()
    except CostCapReached:
        call.close()  # never sent
        raise
    meter.reflections_in_flight += 1
    try:
        response = await call
    finally:
        meter.reflections_in_flight -= 1
    meter.add_reflection(response.usage)
    return response


def check_prices(config: Any, prices: Iterable[Any]) -> None:
    """--max-cost needs every price: one line naming the models whose price is unknown, and the fix."""
    from prime_cli.clients.pricing import unknown_for_a_cap, unknown_price_refusal

    unknown = list(dict.fromkeys(p.model for p in prices if unknown_for_a_cap(p)))
    if config.max_cost is not None and unknown:
        raise ClientConfigError(unknown_price_refusal(config.max_cost, unknown, config.endpoints_path))


class GepaCostMeter:
    def __init__(self, config: Any, student: Any, reflection: Any, saved: Any = None,
                 persist: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.max_cost: float | None = config.max_cost
        self.registry = config.endpoints_path
        self.student_model, self.reflection_model = student.model, reflection.model
        self.prices: dict[str, dict[str, dict[str, Any]]] = {
            "student": {student.model: student.record()}, "judge": {},
            "reflection": {reflection.model: reflection.record()}}
        self.rollouts = {"student": RoleTally(), "judge": RoleTally()}
        self.rollouts["student"].by_model[student.model] = [0, 0]
        self.reflection = RoleTally()
        self.reflection.by_model[reflection.model] = [0, 0]
        saved_reflection = ((saved or {}).get("roles") or {}).get("reflection") if isinstance(saved, dict) else None
        if isinstance(saved_reflection, dict):
            self.reflection.add(reflection.model, saved_reflection)
        self.persist = persist
        self.rollout_spend, self.paid_spend, self.rollouts_counted, self.unknown = 0.0, 0.0, 0, False
        self.free = student.input_per_million == 0 and student.output_per_million == 0
        # a resumed run's reflection calls: their count is saved beside their tokens (at least one when
        # tokens were, so that the average call is never taken as free)
        calls = saved_reflection.get("calls") if isinstance(saved_reflection, dict) else None
        tokens = self.reflection.by_model[reflection.model]
        self.reflection_calls = int(calls) if isinstance(calls, int) and calls > 0 else (1 if any(tokens) else 0)
        self.reflections_in_flight, self.in_flight, self.cap_reached = 0, 0, False
        self._changed: asyncio.Event | None = None

    # -- adding up -----------------------------------------------------------------------------------

    def add_rollout(self, entry: dict[str, Any]) -> None:
        self.rollouts["student"].add(self.student_model, entry.get("usage"))
        for model, usage in judge_usages(entry):
            if model not in self.prices["judge"]:
                from prime_cli.clients.pricing import price_of_name

                self.prices["judge"][str(model)] = price_of_name(str(model), self.registry).record()
            self.rollouts["judge"].add(str(model), usage)
        cost = row_cost(entry, self.prices, self.student_model)
        if cost is None:
            self.unknown = True
        else:
            self.rollout_spend += cost
            if cost > 0:  # the average is over rollouts that paid: an errored one that sent nothing is $0
                self.rollouts_counted += 1
                self.paid_spend += cost

    def add_reflection(self, usage: Any) -> None:
        self.reflection_calls += 1
        self.reflection.add(self.reflection_model, usage.as_dict() if hasattr(usage, "as_dict") else usage)
        if self.persist is not None:
            self.persist(self.record())

    @property
    def shown_spend(self) -> float | None:
        """The spend for progress lines: None when unknown, or nothing is paid and there is no cap."""
        if self.unknown or (not self.spent and self.max_cost is None):
            return None
        return self.spent

    @property
    def reflection_spend(self) -> float:
        return cost_record({"reflection": self.reflection}, self.prices)["total_usd"] or 0.0

    @property
    def spent(self) -> float:
        return self.rollout_spend + self.reflection_spend

    def record(self) -> dict[str, Any]:
        record = cost_record({**self.rollouts, "reflection": self.reflection}, self.prices, self.max_cost,
                             self.cap_reached)
        if "reflection" in record["roles"]:
            record["roles"]["reflection"]["calls"] = self.reflection_calls  # a resumed run's average call
        return record

    # -- the cap -------------------------------------------------------------------------------------

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _fits(self, rollouts: int, extra: float = 0.0) -> bool:
        assert self.max_cost is not None
        if self.unknown:
            return False
        reflecting = self.reflections_in_flight * (self.reflection_average or 0.0) * SAFETY
        if not self.rollouts_counted:
            return (self.free and self.spent + extra + reflecting < self.max_cost) or (
                self.in_flight == 0 and self.spent + extra + reflecting < self.max_cost)
        extra += reflecting
        average = self.paid_spend / self.rollouts_counted
        return self.spent + extra + (self.in_flight + rollouts) * average * SAFETY <= self.max_cost

    @property
    def reflection_average(self) -> float | None:
        return self.reflection_spend / self.reflection_calls if self.reflection_calls else None

    def _stop(self) -> None:
        self.cap_reached = True
        raise CostCapReached(f"cost cap reached: spent {usd(self.spent)} of {usd(self.max_cost)}")

    async def admit(self, rollouts: int) -> None:
        """Wait until a group of `rollouts` fits under the cap (rollouts in flight finish first); raise
        CostCapReached when it cannot. Pair with `finished`."""
        if self.max_cost is not None:
            while not self._fits(rollouts):
                if self.in_flight == 0 or self.cap_reached:
                    self._stop()
                event = self._event()
                event.clear()
                await event.wait()
        self.in_flight += rollouts

    def finished(self, rollouts: int) -> None:
        self.in_flight -= rollouts
        if self._changed is not None:
            self._changed.set()

    def check_reflection(self) -> None:
        """Before a reflection call: the average one's cost (and that of the calls in flight) must fit.
        Before any call has finished its cost is unknown: one call goes alone, while the spend is under
        the cap."""
        if self.max_cost is None:
            return
        average = self.reflection_average
        if average is None and self.reflections_in_flight:
            self._stop()
        expected = (average or 0.0) * SAFETY
        if self.cap_reached or not self._fits(0, expected) and (self.rollouts_counted or self.in_flight == 0):
            self._stop()

    def estimate(self, budget: int) -> str | None:
        if not self.rollouts_counted:
            return None
        average = self.paid_spend / self.rollouts_counted
        return (f"estimated {usd(average * budget)} for the {budget}-rollout budget from the average of the "
                f"{self.rollouts_counted} finished rollouts (reflection calls extra: {usd(self.reflection_spend)} so far)")

    def suggested_cap(self, budget: int, used: int) -> float:
        average = self.paid_spend / self.rollouts_counted if self.rollouts_counted else 0.0
        needed = self.spent + max(0, budget - used) * average * SAFETY
        return math.ceil(max(needed, 2 * (self.max_cost or 0.0)) * 100) / 100


def model_prices(config: Any) -> tuple[Any, Any]:
    """The student's and the reflection model's Price (clients/pricing.py), resolved as the run resolves them."""
    from prime_cli.clients.pricing import price_of_specs

    from .preflight import model_specs, reflection_url

    def price(model: str, url: str | None, local: bool) -> Any:
        from prime_cli.clients.command_flags import is_local_model

        if local or (is_local_model(model) and not url):
            return price_of_specs(model, [], local=True)
        try:
            specs = model_specs(config, model, url)
        except ClientConfigError:
            specs = []
        return price_of_specs(model, specs, base_url=url)

    return (price(config.model, config.base_url, config.served_local),
            price(config.reflector, reflection_url(config), config.reflection_served_local))


def check_cost_cap(config: Any, env: Any) -> None:
    """Before anything runs: --max-cost with a price unknown is refused."""
    if config.max_cost is None:
        return
    from prime_cli.clients.pricing import judge_models, price_of_name

    judges = [price_of_name(m, config.endpoints_path) for m in judge_models(getattr(env, "rubric", None))]
    check_prices(config, [*model_prices(config), *judges])


def open_meter(config: Any, run: Any, cache: Any) -> GepaCostMeter:
    """The run's meter, counting the rollouts already in its cache and the reflection tokens it saved."""
    student, reflection = model_prices(config)
    saved = run.metadata.get("cost")
    meter = GepaCostMeter(config, student, reflection, saved, persist=lambda record: run.write_metadata(cost=record))
    for entry in cache.results.values():
        meter.add_rollout(entry)
    return meter


ESTIMATE_AFTER = 8  # finished rollouts the up-front estimate averages (fewer when the budget is smaller)


def estimating(meter: GepaCostMeter, budget: int, say: Callable[[str], None],
               on_rollout: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """`on_rollout`, and once enough rollouts have finished (a resumed run's earlier ones count), the estimate."""
    told = [False]

    def tell() -> None:
        if not told[0] and meter.rollouts_counted >= min(ESTIMATE_AFTER, budget) and (line := meter.estimate(budget)):
            told[0] = True
            say(line)

    def rollout_done(entry: dict[str, Any]) -> None:
        on_rollout(entry)
        tell()

    return rollout_done


def stop_line(meter: GepaCostMeter, resume: str | None, budget: int, used: int) -> str:
    head = f"cost cap reached: spent {usd(meter.spent)} of {usd(meter.max_cost)}"
    if meter.unknown:
        head = f"cost cap: a judge model without prices was used (spent {usd(meter.spent)} known); the run stops"
    if resume is None:
        return head
    return f"{head}; resume with a higher cap: {resume}"  # resume_command carries the higher cap
