"""Reading a results row's reward and example id the same way in every summary."""

from __future__ import annotations

import math
from typing import Any


def reward_value(value: Any) -> float:
    """A row's reward as a float; None, NaN and non-numbers count as 0.0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def example_key(example_id: Any) -> Any:
    """The example id as a dict key (unhashable ids by their repr)."""
    try:
        hash(example_id)
        return example_id
    except TypeError:
        return repr(example_id)
