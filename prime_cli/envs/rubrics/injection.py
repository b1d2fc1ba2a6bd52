"""Signature analysis of reward functions: which arguments a function asks for, by name.

A reward function names what it wants (`completion`, `answer`, `parser`, ...). Plural names
(`completions`, `states`, ...) make it a group function, called once per group with lists.
The analysis is done once per function and cached; building the call arguments is then a lookup.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prime_cli.envs.errors import RubricError

SINGULAR_NAMES: tuple[str, ...] = ("prompt", "completion", "answer", "state", "task", "info")
PLURAL_NAMES: dict[str, str] = {name + "s": name for name in SINGULAR_NAMES}

_EMPTY = inspect.Parameter.empty


@dataclass(frozen=True)
class FuncSignature:
    """What one reward function asks for."""

    name: str
    is_group: bool
    positional: tuple[str, ...]  # positional-only parameters, in order
    keyword: tuple[str, ...]  # parameters passed by keyword
    required: frozenset[str]
    accepts_kwargs: bool

    def build_kwargs(
        self, available: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The (args, kwargs) to call the function with, given the names available.

        Raises RubricError when a required parameter is not available.
        """
        missing = [p for p in (*self.positional, *self.keyword) if p in self.required and p not in available]
        if missing:
            raise RubricError(
                f"reward function {self.name!r} asks for parameter {missing[0]!r}, which is not "
                f"available. Available names: {', '.join(sorted(available))}. Rename the "
                f"parameter, give it a default, or register it with add_class_object()."
            )
        args: list[Any] = []
        for i, param in enumerate(self.positional):
            if param not in available:
                later = [p for p in self.positional[i + 1 :] if p in available]
                if later:
                    raise RubricError(
                        f"reward function {self.name!r}: positional-only parameter {later[0]!r} "
                        f"cannot be passed because {param!r} before it is not available"
                    )
                break
            args.append(available[param])
        if self.accepts_kwargs:
            kwargs = {k: v for k, v in available.items() if k not in self.positional}
        else:
            kwargs = {k: available[k] for k in self.keyword if k in available}
        return args, kwargs


def func_name(func: Callable[..., Any]) -> str:
    """The name a reward function is known by (the wrapped function's name for partials)."""
    while isinstance(func, functools.partial):
        func = func.func
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) else type(func).__name__


# Keyed weakly by the underlying function so bound methods (a new object on every attribute
# access) share one entry and nothing is kept alive by the cache.
_cache: weakref.WeakKeyDictionary[Any, dict[bool, FuncSignature]] = weakref.WeakKeyDictionary()


def analyze(func: Callable[..., Any]) -> FuncSignature:
    """Analyze (with caching) the signature of a reward function. Raises RubricError if invalid."""
    bound = inspect.ismethod(func)
    key = func.__func__ if bound else func  # type: ignore[union-attr]
    try:
        entry = _cache.get(key)
    except TypeError:  # unhashable callable object: analyze without caching
        return _analyze(func)
    if entry is not None and bound in entry:
        return entry[bound]
    sig = _analyze(func)
    try:
        _cache.setdefault(key, {})[bound] = sig
    except TypeError:  # not weak-referenceable
        pass
    return sig


def _analyze(func: Callable[..., Any]) -> FuncSignature:
    name = func_name(func)
    if not callable(func):
        raise RubricError(f"reward function {name!r} is not callable")
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError) as exc:
        raise RubricError(f"cannot read the signature of reward function {name!r}: {exc}") from exc

    positional: list[str] = []
    keyword: list[str] = []
    required: set[str] = set()
    accepts_kwargs = False
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            accepts_kwargs = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        (positional if p.kind is p.POSITIONAL_ONLY else keyword).append(p.name)
        if p.default is _EMPTY:
            required.add(p.name)

    names = [*positional, *keyword]
    plural = [n for n in names if n in PLURAL_NAMES]
    singular = [n for n in names if n in SINGULAR_NAMES]
    if plural and singular:
        raise RubricError(
            f"reward function {name!r} mixes per-rollout parameters ({', '.join(singular)}) with "
            f"group parameters ({', '.join(plural)}); use either singular names (called once per "
            f"rollout) or plural names (called once per group with lists)"
        )
    return FuncSignature(
        name=name,
        is_group=bool(plural),
        positional=tuple(positional),
        keyword=tuple(keyword),
        required=frozenset(required),
        accepts_kwargs=accepts_kwargs,
    )
