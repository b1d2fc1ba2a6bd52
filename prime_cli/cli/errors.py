"""One clear line on stderr: `error: ` and exit code 2 for bad input, `warning: ` for library warnings."""

from __future__ import annotations

import warnings
from typing import Any, NoReturn

import typer


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def one_line_warnings() -> None:
    """Show prime's own warnings as `warning: MESSAGE` (one line), others as Python formats them."""
    default = warnings.formatwarning

    def formatwarning(message: Any, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
        if category.__module__.startswith("prime_cli."):
            return f"warning: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning
