"""A GEPA run's dollar spend and `--max-cost`: every student rollout it ran (seed validation,
minibatches, validation passes, test rows, prefetches), the judge calls inside them, and the reflection
calls, at the prices chosen when the run starts.

Rollout tokens live in rollouts.jsonl (each entry's `usage` and `judge_usage`), so a resumed run counts
its earlier rollouts again from there; reflection tokens are kept in metadata.json `cost`, rewritten
after each reflection call.

The tally and the cap's arithmetic are the meter every engine shares (results/cost_meter.py). The cap is
checked before a group of rollouts is sent (`admit`: the spend so far plus the expected cost of the
rollouts in flight and of this group must stay within it; before any rollout has paid, one group runs
alone) and before a reflection call (its expected cost is the average reflection call's). Past the cap,
CostCapReached stops the search.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from prime_cli.clients.cost_cap import judge_price_records, judge_prices, refuse_unknown_prices
from prime_cli.clients.errors import ClientConfigError
from prime_cli.results.cost import usd
from prime_cli.results.cost_meter import SAFETY, RunCostMeter

from .model_endpoints import model_specs, reflection_url


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


class GepaCostMeter(RunCostMeter):
    """The search's meter: the student, its judges and the reflection model. Rollouts wait in `admit`
    for room under the cap, a reflection call is checked by `check_reflection` (through `metered`)."""

    def __init__(self, config: Any, student: Any, reflection: Any, saved: Any = None,
                 persist: Callable[[dict[str, Any]], None] | None = None) -> None:
        super().__init__(student, config.max_cost, judge_price_records(config.endpoints_path), reflection)
        saved_reflection = ((saved or {}).get("roles") or {}).get("reflection") if isinstance(saved, dict) else None
        if isinstance(saved_reflection, dict):
            self.tallies["reflection"].add(reflection.model, saved_reflection)
        self.persist = persist
        # a resumed run's reflection calls: their count is saved beside their tokens (at least one when
        # tokens were, so that the average call is never taken as free)
        calls = saved_reflection.get("calls") if isinstance(saved_reflection, dict) else None
        tokens = self.tallies["reflection"].by_model[reflection.model]
        self.reflection_calls = int(calls) if isinstance(calls, int) and calls > 0 else (1 if any(tokens) else 0)
        self.in_flight = 0
        self._changed: asyncio.Event | None = None

    @property
    def rollouts_counted(self) -> int:
        """Finished rollouts that paid for tokens: the average is theirs."""
        return self.paid

    def add_reflection(self, usage: Any) -> None:
        super().add_reflection(usage)
        if self.persist is not None:
            self.persist(self.record())

    # -- the cap -------------------------------------------------------------------------------------

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _fits(self, rollouts: int, extra: float = 0.0) -> bool:
        return self.fits(self.in_flight, rollouts, extra)

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
        average = self.average
        if average is None:
            return None
        return (f"estimated {usd(average * budget)} for the {budget}-rollout budget from the average of the "
                f"{self.rollouts_counted} finished rollouts (reflection calls extra: {usd(self.reflection_spend)} so far)")

    def suggested_cap(self, budget: int, used: int) -> float:
        return self.raised_cap(budget - used)


def model_prices(config: Any) -> tuple[Any, Any]:
    """The student's and the reflection model's Price (clients/pricing.py), resolved as the run resolves them."""
    from prime_cli.clients.pricing import price_of_specs  # lazy: already loaded

    def price(model: str, url: str | None, local: bool) -> Any:
        from prime_cli.clients.command_flags import is_local_model  # lazy: already loaded

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
    refuse_unknown_prices(config.max_cost, [*model_prices(config), *judge_prices(env, config.endpoints_path)],
                          config.endpoints_path)


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
    head = meter.stop_head()
    if resume is None:
        return head
    return f"{head}; resume with a higher cap: {resume}"  # resume_command carries the higher cap
