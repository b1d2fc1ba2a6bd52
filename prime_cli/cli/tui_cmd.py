"""`prime eval tui`: browse evaluation and GEPA runs (Textual, imported only when run)."""

from __future__ import annotations


def tui() -> None:
    """Browse evaluation and GEPA runs."""
    raise SystemExit("prime eval tui: not built yet")
