"""`@vf.reward`, `@vf.metric`, `@vf.stop`, `@vf.tool` and `@vf.intercept` of verifiers' v1 API.

Each marks a method; `marked(obj, kind)` finds an object's marked methods, higher `priority` first, then by
name (the order verifiers runs them in). A method overridden without the decorator is no longer marked.
A marked method declares what it reads by parameter name (`trace`, `task`, `runtime`, `request`,
`response`); `call_with(fn, available)` hands it those.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
KINDS = ("reward", "metric", "stop", "tool", "intercept")
ATTR = "_prime_v1_kind"


def _decorator(kind: str, func: Any, **extra: Any) -> Any:
    def mark(f: F) -> F:
        setattr(f, ATTR, kind)
        f._prime_v1_priority = extra.pop("priority", 0)  # type: ignore[attr-defined]
        for key, value in extra.items():
            setattr(f, key, value)
        return f

    if func is not None and not callable(func):
        raise TypeError(f"@vf.{kind} expects a function; give its options as keywords (weight=..., priority=...)")
    return mark if func is None else mark(func)


def reward(func: Any = None, weight: float = 1.0, priority: int = 0) -> Any:
    """A weighted reward `(self, trace, ...) -> float` (or a dict of named floats); the rollout's reward is
    the weighted sum."""
    return _decorator("reward", func, weight=float(weight), priority=priority)


def metric(func: Any = None, priority: int = 0) -> Any:
    """A metric `(self, trace, ...) -> float` (or a dict): recorded, not summed into the reward."""
    return _decorator("metric", func, priority=priority)


def stop(func: Any = None, priority: int = 0) -> Any:
    """A stop condition `(self, trace) -> bool`, asked after every model reply."""
    return _decorator("stop", func, priority=priority)


def tool(func: Any = None, name: str | None = None) -> Any:
    """A tool of a `Toolset`, offered to the model as `<TOOL_PREFIX>_<name>`; its docstring describes it."""
    return _decorator("tool", func, tool_name=name)


def intercept(func: Any = None, priority: int = 0) -> Any:
    """A request or response rewrite (verifiers runs these in its interception proxy; prime refuses a task
    that has one, at load)."""
    return _decorator("intercept", func, priority=priority)


def marked(obj: object, kind: str) -> list[Callable[..., Any]]:
    """`obj`'s bound methods marked `kind`, higher priority first, then by name."""
    names: set[str] = set()
    for klass in type(obj).__mro__:
        for name, value in vars(klass).items():
            if getattr(value, ATTR, None) == kind:
                names.add(name)
    methods = [m for name in names if getattr(m := getattr(obj, name), ATTR, None) == kind]
    return sorted(methods, key=lambda m: (-getattr(m, "_prime_v1_priority", 0), m.__name__))


def call_with(fn: Callable[..., Any], available: dict[str, Any]) -> Any:
    """`fn` called with the values of `available` its parameters name (a missing one keeps its default)."""
    params = inspect.signature(fn).parameters
    missing = [n for n, p in params.items() if n not in available and p.default is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        raise TypeError(f"{fn.__qualname__} asks for {', '.join(missing)}, which prime does not provide here "
                        f"(it provides {', '.join(sorted(available))})")
    return fn(**{n: available[n] for n in params if n in available})
