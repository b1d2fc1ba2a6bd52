"""`prime lab setup`: write a ready workspace."""

from __future__ import annotations

import typer

lab_app = typer.Typer(help="Set up a workspace (configs/, environments/).", no_args_is_help=True)
