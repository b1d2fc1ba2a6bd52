"""Check `env_args` against a `load_environment` signature before calling it.

An unknown argument, or a value that does not fit the parameter's type annotation (`"abc"` where an
`int` is expected), is an `EnvironmentLoadError` naming the argument and what it takes, instead of a
traceback from deep inside the environment. Values are checked strictly as JSON values (`"5"` is not
an int); parameters without an annotation, or with one pydantic cannot check, are not checked.
"""

from __future__ import annotations

import difflib
import inspect
import json
import typing
from collections.abc import Callable
from typing import Any

from .errors import EnvironmentLoadError


def check_env_args(env_id: str, factory: Callable[..., Any], env_args: dict[str, Any]) -> None:
    signature = inspect.signature(factory)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    named = [n for n, p in signature.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [name for name in env_args if name not in named and not takes_any]
    if unknown:
        close = difflib.get_close_matches(unknown[0], named, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise EnvironmentLoadError(
            f"{env_id}: load_environment{_short(signature)} has no argument {unknown[0]!r}{hint}; "
            "fix -a/--env-args")
    try:
        signature.bind(**env_args)
    except TypeError as exc:
        raise EnvironmentLoadError(
            f"{env_id}: load_environment{signature} does not accept these arguments ({exc})"
        ) from None
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: nothing to check against
        hints = {}
    for name, value in env_args.items():
        param = signature.parameters.get(name)
        if param is None or name not in hints or value is None:  # `x: str = None` is common enough
            continue
        problem = _mismatch(hints[name], value)
        if problem is not None:
            shown = param.annotation if isinstance(param.annotation, str) else inspect.formatannotation(hints[name])
            raise EnvironmentLoadError(
                f"{env_id}: env argument {name}={json.dumps(value)} does not fit load_environment's "
                f"`{name}: {shown}` ({problem}); fix it in -a/--env-args")


def _short(signature: inspect.Signature, width: int = 24) -> str:
    """`(name: type = default, ...)` with long defaults (a whole system prompt) cut short."""
    parts = []
    for param in signature.parameters.values():
        text = param.name if param.kind is not param.VAR_KEYWORD else f"**{param.name}"
        if param.annotation is not param.empty:
            annotation = param.annotation
            text += f": {annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)}"
        if param.default is not param.empty:
            default = repr(param.default)
            text += f" = {default if len(default) <= width else default[:width - 3] + '...'}"
        parts.append(text)
    return f"({', '.join(parts)})"


def _mismatch(annotation: Any, value: Any) -> str | None:
    """Why `value` does not fit `annotation`, or None when it fits or cannot be checked."""
    from pydantic import ConfigDict, TypeAdapter, ValidationError  # lazy: heavy

    try:
        text = json.dumps(value)
        adapter = TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True))
    except Exception:  # noqa: BLE001 - not JSON, or a type pydantic cannot build a validator for
        return None
    try:
        adapter.validate_json(text, strict=True)
    except ValidationError as exc:
        return exc.errors()[0]["msg"].lower()
    except Exception:  # noqa: BLE001 - arbitrary classes have no JSON validator: unchecked
        return None
    return None
