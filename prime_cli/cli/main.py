"""The `prime` command. Parses flags and delegates to an engine; heavy imports stay inside commands."""

from __future__ import annotations

import typer

from prime_cli import __version__

from .errors import PrimeGroup

app = typer.Typer(
    name="prime",
    cls=PrimeGroup,
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


from .env_cmd import env_app  # noqa: E402
from .eval_cmd import eval_app  # noqa: E402
from .gepa_cmd import gepa_app  # noqa: E402
from .lab_cmd import lab_app  # noqa: E402
from .sandbox_cmd import sandbox_app  # noqa: E402
from .serve_cmd import serve  # noqa: E402
from .train_cmd import EPILOG as TRAIN_EPILOG  # noqa: E402
from .train_cmd import train  # noqa: E402
from .tui_cmd import tui  # noqa: E402

eval_app.command("view")(tui)  # the name newer prime CLIs give the results viewer
eval_app.command("tui")(tui)
app.add_typer(eval_app, name="eval")
app.add_typer(gepa_app, name="gepa")
app.add_typer(env_app, name="env")
app.add_typer(lab_app, name="lab")
app.add_typer(sandbox_app, name="sandbox")
app.command("serve")(serve)
app.command("train", epilog=TRAIN_EPILOG)(train)

EVAL_COMMANDS = ("run", "view", "tui", "export", "compare", "rescore")
EVAL_SUBCOMMANDS = {*EVAL_COMMANDS, "--help", "-h"}


def normalize_argv(argv: list[str]) -> list[str]:
    """`prime eval ENV` means `prime eval run ENV`. (A bare `-R` is read by its command: options.py.)"""
    argv = list(argv)
    if len(argv) >= 2 and argv[0] == "eval" and argv[1] not in EVAL_SUBCOMMANDS:
        argv.insert(1, "run")
    return argv


def unknown_eval_word(argv: list[str]) -> str | None:
    """Why `prime eval WORD` is neither a subcommand nor an environment (nor a TOML file), else None."""
    if len(argv) < 2 or argv[0] != "eval" or argv[1] in EVAL_SUBCOMMANDS or argv[1].startswith("-"):
        return None
    word = argv[1]
    from pathlib import Path  # lazy: already loaded

    if word.endswith(".toml") or Path(word).is_file():
        return None
    from prime_cli.envs.loader import (  # lazy: start-up
        environment_exists,
        malformed_id,
        missing_owned_environment,
        module_name,
    )

    if problem := malformed_id(word):
        return problem
    if environment_exists(word):
        return None
    if word.count("/") == 1 and module_name(word).isidentifier():
        return missing_owned_environment(word, module_name(word))
    import difflib  # lazy: already loaded

    close = difflib.get_close_matches(word, EVAL_COMMANDS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "; see prime eval --help"
    return (f"{word!r} is not a `prime eval` command ({', '.join(EVAL_COMMANDS)}) nor an environment "
            f"(no installed module {module_name(word)}, no ./environments/{module_name(word)}/, not a TOML file){hint}")


def main(argv: list[str] | None = None) -> None:
    import sys  # lazy: already loaded

    from .errors import one_line_warnings  # lazy: already loaded

    one_line_warnings()
    args = sys.argv[1:] if argv is None else list(argv)
    if problem := unknown_eval_word(args):
        typer.echo(f"error: {problem}", err=True)
        sys.exit(2)
    app(args=normalize_argv(args), prog_name="prime")


if __name__ == "__main__":
    main()
