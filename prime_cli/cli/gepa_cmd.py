"""`prime gepa run`: optimise an environment's system prompt with GEPA."""

from __future__ import annotations

import typer

gepa_app = typer.Typer(help="Optimise an environment's system prompt with GEPA.", no_args_is_help=True)
