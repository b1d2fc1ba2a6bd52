"""Field types that eval's and GEPA's configs share, each with the one message the user reads when a value
is out of range ("must be at least 1"): `max_concurrent: Count = 32`, `max_tokens: Count | None = None`."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def _at_least_one(value: int) -> int:
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _zero_or_more(value: float) -> float:
    if not value >= 0:  # NaN too
        raise ValueError("must be 0 or more")
    return value


def _seconds(value: float) -> float:
    if not value > 0:
        raise ValueError("must be more than 0 seconds")
    return value


def _dollars(value: float) -> float:
    if not (value > 0 and value != float("inf")):  # NaN and inf too
        raise ValueError("must be a positive number of dollars, e.g. 2.50")
    return value


Count = Annotated[int, AfterValidator(_at_least_one)]
ZeroOrMore = Annotated[int, AfterValidator(_zero_or_more)]
NonNegative = Annotated[float, AfterValidator(_zero_or_more)]
Seconds = Annotated[float, AfterValidator(_seconds)]
Dollars = Annotated[float, AfterValidator(_dollars)]
