"""How often a long wait says it is still waiting, on output without a spinner (a pipe, CI). Each caller
names its own variable, which tests set to a fraction of a second because they cannot wait that long."""

from __future__ import annotations

import math
import os


def notice_interval(variable: str, default_s: float) -> float:
    """Seconds from environment variable `variable`, else (unset, not a number, not positive) `default_s`."""
    try:
        value = float(os.environ.get(variable, ""))
    except ValueError:
        return default_s
    return value if math.isfinite(value) and value > 0 else default_s
