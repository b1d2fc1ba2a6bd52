"""`prime env init|install|list|info`: manage environment packages."""

from __future__ import annotations

import typer

env_app = typer.Typer(help="Create, install, list and inspect environments.", no_args_is_help=True)
