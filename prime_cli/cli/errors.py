"""One clear line on stderr: `error: ` and exit code 2 for bad input, `warning: ` for library warnings."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class FlagValueError(typer.BadParameter):
    """A value the parser refused (not a number, out of range), shown as one `error:` line, exit 2."""

    def show(self, file: Any = None) -> None:
        typer.echo(f"error: {self.message}", file=file, err=True)


class PrimeGroup(TyperGroup):
    """The `prime` command group: a flag's bad value anywhere below it is one line naming the flag."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            if type(exc) is not typer.BadParameter:  # a missing argument keeps its usage text
                raise
            raise FlagValueError(bad_value_message(exc)) from None


_RANGE_WORDS = {">=": "at least", ">": "more than", "<=": "at most", "<": "less than"}


def bad_value_message(exc: typer.BadParameter) -> str:
    """`-n/--num-examples must be a whole number (got 'many')` from the parser's own wording."""
    param = exc.param
    text = str(exc.message).rstrip(".")
    if param is None:
        return text
    name = "/".join(param.opts) if param.param_type_name == "option" else param.human_readable_name
    if match := re.fullmatch(r"(.+) is not a valid (integer|int|float)", text):
        kind = "a number" if match[2] == "float" else "a whole number"
        return f"{name} must be {kind} (got {match[1]})"
    if match := re.fullmatch(r"(.+) is not in the range (.+)", text):
        bound = re.fullmatch(r"x(>=|>|<=|<)(.+)", match[2])
        words = f"{_RANGE_WORDS[bound[1]]} {bound[2]}" if bound else f"in the range {match[2]}"
        return f"{name} must be {words} (got {match[1]})"
    return f"{name}: {text}"


def flag_names(ctx: typer.Context, keys: Iterable[str]) -> dict[str, str]:
    """Config key -> the flag that gave it on the command line (`num_examples` -> `-n/--num-examples`),
    for `keys` (those the user gave): read from the command's own options, named like the config keys."""
    options = {param.name: "/".join(param.opts) for param in ctx.command.params
               if param.param_type_name == "option" and param.name}
    return {key: options[key] for key in keys if key in options}


def fail_config(exc: Exception, ctx: typer.Context, flag_values: Iterable[str]) -> NoReturn:
    """The engine's config error as one line; a value that came from a flag is called by that flag. With the
    command's -v, an environment's load failure also shows its traceback (fail_error)."""
    describe = getattr(exc, "describe", None)  # prime_cli.runs.config_errors.ConfigValueError
    message = describe(flag_names(ctx, flag_values)) if callable(describe) else None
    fail_error(exc, bool(ctx.params.get("verbose")), message)


def _code_failure(exc: BaseException) -> Any:
    """The EnvironmentCodeError (the environment's own code failed) in `exc` or its causes, else None."""
    seen = 0
    while exc is not None and seen < 10:
        if hasattr(exc, "traceback_helps"):
            return exc
        exc, seen = exc.__cause__, seen + 1
    return None


def fail_error(exc: BaseException, verbose: bool = False, message: str | None = None) -> NoReturn:
    """`exc` as one `error:` line (its message, or `message`). When the environment's own code failed
    (prime_cli.envs.load_errors), -v prints the traceback of the original error above the line, and without
    -v the line says so; its text, from the environment, is shown with control characters escaped."""
    line = str(exc) if message is None else message
    failure = _code_failure(exc)
    if failure is None:
        fail(line)
    from prime_cli.runs.visible import visible  # lazy: start-up

    line = visible(line)
    if verbose:
        import traceback  # lazy: already loaded

        cause = failure.__cause__ or failure
        typer.echo(visible("".join(traceback.format_exception(cause)).rstrip(), multiline=True), err=True)
    elif failure.traceback_helps:
        line += " (-v shows the traceback)"
    fail(line)


def one_line_warnings() -> None:
    """Show prime's own warnings as `warning: MESSAGE` (one line), others as Python formats them."""
    default = warnings.formatwarning

    def formatwarning(message: Any, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
        if category.__module__.startswith("prime_cli."):
            return f"warning: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning


def json_object_arg(flag: str, text: str | None) -> dict[str, Any] | None:
    """A flag's JSON object (`-a '{"k": 1}'`), or one `error:` line naming the flag; None when not given."""
    if text is None:
        return None
    import json  # lazy: already loaded

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{flag} is not valid JSON ({exc.msg} at char {exc.pos}): {text}")
    if not isinstance(value, dict):
        fail(f"{flag} must be a JSON object like '{{\"key\": 1}}', got {text}")
    return value

