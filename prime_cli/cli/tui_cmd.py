"""`prime eval view` (also `prime eval tui`): browse evaluation, GEPA and training runs (Textual, imported only when run)."""

from __future__ import annotations

from pathlib import Path

import typer

from .errors import fail


def tui(
    path: Path | None = typer.Argument(
        None,
        help="A run folder to open directly (an eval or GEPA run, or a `prime train` output folder), "
        "or a folder to search for runs (e.g. ./outputs). "
        "Default: ./environments/*/outputs and ./outputs; when they hold no run, the folders below the "
        "working folder, 4 deep (e.g. runs saved with -o out).",
        show_default=False,
    ),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between checks for new rows of a running run."),
) -> None:
    """Browse, inspect and compare evaluations, GEPA runs and training runs (q goes back, ? shows the keys)."""
    from prime_cli.runs.metadata import RunDirError  # lazy: start-up
    from prime_cli.tui.locate import locate  # lazy: start-up

    try:  # the path is checked before Textual is imported, so a bad one is one line
        located = locate(path)
    except RunDirError as exc:
        fail(str(exc))
    from prime_cli.tui.app import make_app  # lazy: start-up (Textual is imported only here)

    make_app(path, live_interval=interval, located=located).run()
