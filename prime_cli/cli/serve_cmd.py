"""`prime serve`: serve a local model with vLLM (the embedded default)."""

from __future__ import annotations


def serve() -> None:
    """Serve a local model with vLLM."""
    raise SystemExit("prime serve: not built yet")
