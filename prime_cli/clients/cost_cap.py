"""What `--max-cost` needs from the prices, for every engine: each price known before anything runs, and
a judge's price looked up by name when its first call is counted (results/cost_meter.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from .errors import ClientConfigError
from .pricing import Price, judge_models, price_of_name, unknown_for_a_cap, unknown_price_refusal

Registry = str | os.PathLike[str] | None


def judge_prices(env: Any, registry: Registry) -> list[Price]:
    """The prices of the judge models an environment's rubric calls."""
    return [price_of_name(model, registry) for model in judge_models(getattr(env, "rubric", None))]


def judge_price_records(registry: Registry) -> Callable[[str], dict[str, Any]]:
    """The price record of a judge model, by name (a meter's `judge_price`)."""
    return lambda model: price_of_name(model, registry).record()


def refuse_unknown_prices(max_cost: float | None, prices: Iterable[Price], registry: Registry) -> None:
    """--max-cost needs every price: one line naming the models whose price is unknown, and the fix."""
    if max_cost is None:
        return
    unknown = list(dict.fromkeys(price.model for price in prices if unknown_for_a_cap(price)))
    if unknown:
        raise ClientConfigError(unknown_price_refusal(max_cost, unknown, registry))
