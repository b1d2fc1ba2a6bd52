"""The `prime` command. Parses flags and delegates to an engine; heavy imports stay inside commands."""

from __future__ import annotations

import typer

from prime_cli import __version__

app = typer.Typer(
    name="prime",
    help="Write RL environments for language models, evaluate models on them, optimise their "
    "prompts with GEPA, browse results, and train with LoRA RL.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"prime {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."),
) -> None:
    """prime: environments, evals, GEPA and LoRA RL for language models."""


def main() -> None:
    app(prog_name="prime")


if __name__ == "__main__":
    main()
