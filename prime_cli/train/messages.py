"""Pydantic validation errors of the training config as one line that names the key and the fix."""

from __future__ import annotations

import re
import typing
from typing import Any

from prime_cli.runs.config_errors import closest_key, problem_message

from .overrides import format_path

REQUIRED_HINTS = {
    "orchestrator": 'orchestrator is required: add an [orchestrator] table and at least one '
                    '[[orchestrator.env]] with id = "..."',
    "orchestrator.env": 'orchestrator.env is required: add at least one [[orchestrator.env]] with id = "..."',
}
TYPE_WORDS = {
    "model_type": "must be a table", "dict_type": "must be a table", "list_type": "must be a list",
    "int_type": "must be an integer", "int_parsing": "must be an integer", "int_from_float": "must be an integer",
    "float_type": "must be a number", "float_parsing": "must be a number", "bool_type": "must be true or false",
    "bool_parsing": "must be true or false", "string_type": "must be a string",
}


def _model_in(annotation: Any) -> type | None:
    from pydantic import BaseModel  # lazy: heavy

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def section_keys(model: type, loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the section at `loc` (walking nested models, lists and optionals)."""
    current: type | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if current is not None else None
        if field is None:
            return None
        current = _model_in(field.annotation)
    return list(current.model_fields) if current is not None else None


def _unknown_key(model: type, loc: tuple[Any, ...], source: str, extra_keys: list[str]) -> str:
    path = format_path(loc)
    keys = section_keys(model, loc[:-1]) or []
    if not loc[:-1]:
        keys = keys + extra_keys
    close = closest_key(str(loc[-1]), keys)
    if close:
        hint = f"did you mean {format_path((*loc[:-1], close))}?"
    elif keys:
        section = format_path(loc[:-1]) or "the top level"
        hint = f"keys of {section}: {', '.join(keys)}"
    else:
        hint = "remove it"
    return f"unknown key {path} in {source} ({hint})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_error(error: dict[str, Any], model: type, source: str, extra_keys: list[str] = ()) -> str:
    loc = tuple(error.get("loc", ()))
    path = format_path(loc)
    kind = error.get("type", "")
    message = problem_message(error)  # pydantic's words without "Value error, "; "Input should be" -> "must be"
    if kind == "extra_forbidden":
        return _unknown_key(model, loc, source, list(extra_keys))
    if kind in ("missing", "too_short") and path in REQUIRED_HINTS:
        return REQUIRED_HINTS[path]
    if kind == "missing":
        parent = format_path(loc[:-1])
        where = f" under [{parent}]" if parent else ""
        return f"{path} is required: add {loc[-1]} = ...{where}"
    if kind in TYPE_WORDS:
        return f"{path} {TYPE_WORDS[kind]} (got {_short(error.get('input'))})"
    if kind == "value_error" or kind == "assertion_error":
        return message if not path or path in message else f"{path}: {message}"
    if message.startswith("must be "):
        return f"{path} {message} (got {_short(error.get('input'))})"
    return f"{path}: {message}" if path else message


def describe_validation_error(exc: Any, model: type, source: str, extra_keys: list[str] = ()) -> str:
    errors = exc.errors()
    line = describe_error(errors[0], model, source, extra_keys) if errors else str(exc).splitlines()[0]
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return line


def rename_paths(message: str, renames: dict[str, str]) -> str:
    """Show hosted-shape names (`batch_size`) for the v0.4 paths they map to (`orchestrator.batch_size`)."""
    for long, short in sorted(renames.items(), key=lambda kv: -len(kv[0])):
        message = re.sub(rf"(?<![\w.]){re.escape(long)}(?![\w])", short, message)
    return message
