"""evals layer (see DESIGN.md). `load_run(path)` reads a saved run as typed data."""

from __future__ import annotations

from typing import Any

__all__ = ["EvalRun", "load_run"]


def __getattr__(name: str) -> Any:  # lazy: `prime --help` imports this package and must stay light
    if name in __all__:
        from prime_cli.results import eval_run as results  # lazy: heavy

        return getattr(results, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
