"""The config files of eval, GEPA and training runs: read as TOML and validated into a pydantic model, each
problem one line that names the file (or the flag) and the key as the user wrote them.

A file that is missing, a folder, unreadable or not TOML is worded alike for every engine; the caller gives
the exception class its CLI shows as one `error:` line and where the example configs are. Validation
problems become a `ConfigValueError` (config_errors.py), which the CLI rewords for keys given by flags.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from prime_cli.envs.errors import EnvConfigError

from .config_errors import ConfigValueError, closest_key, value_problem

Model = TypeVar("Model")


def read_config_text(path: Path, examples: str, error: type[Exception] = EnvConfigError) -> str:
    """The text of a config file; `error` says what is wrong with it otherwise (and where `examples` are)."""
    if not path.exists():
        raise error(f"config file {path} does not exist (examples: {examples})")
    if not path.is_file():
        raise error(f"{path} is not a file; give a TOML config (examples: {examples})")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read it ({exc})") from None


def parse_toml(text: str, path: Path, error: type[Exception] = EnvConfigError) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path} is not valid TOML: {str(exc).splitlines()[0]}") from None


def read_toml_config(path: Path, examples: str, error: type[Exception] = EnvConfigError) -> dict[str, Any]:
    return parse_toml(read_config_text(path, examples, error), path, error)


def validation_error(exc: Any, known_keys: Iterable[str], where: str) -> ConfigValueError:
    """A pydantic `ValidationError` of a flat config: each problem naming its key in `where`; an unknown
    key with the closest of `known_keys`, or all of them when none is close."""
    known = list(known_keys)
    problems, others = [], []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(entry)"
        if error["type"] == "extra_forbidden":
            close = closest_key(str(error["loc"][-1]), known)
            hint = f"did you mean '{close}'?" if close else f"keys: {', '.join(known)}"  # as train's messages
            others.append(f"{where}: unknown key '{key}' ({hint})")
        elif error["type"] == "missing":
            others.append(f"{where}: missing required key '{key}'")
        else:
            problems.append(value_problem(error))
    return ConfigValueError(where, problems, others)


def build_model(model: type[Model], where: str, values: dict[str, Any]) -> Model:
    """`model(**values)`, or a `ConfigValueError` naming each bad key in `where` (a file, "command line")."""
    from pydantic import ValidationError  # lazy: heavy

    try:
        return model(**values)
    except ValidationError as exc:
        raise validation_error(exc, model.model_fields, where) from None  # type: ignore[attr-defined]
