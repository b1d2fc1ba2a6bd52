"""`@vf.stop` and `@vf.cleanup`: mark environment methods as stop conditions or cleanup handlers.

Both work bare (`@vf.stop`) or with a priority (`@vf.stop(priority=10)`); higher priorities run
first, ties in name order. A stop condition is `(self, state) -> bool` (sync or async); the first
that returns True ends the rollout and its name is recorded as `state["stop_condition"]`. Cleanup
handlers `(self, state)` run when a rollout ends, whatever the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

STOP_ATTR = "_prime_stop_priority"
CLEANUP_ATTR = "_prime_cleanup_priority"


def _marker(attr: str):
    def decorator(func: F | None = None, *, priority: int = 0):
        def mark(f: F) -> F:
            setattr(f, attr, priority)
            return f

        if func is not None:
            if not callable(func):
                raise TypeError(f"@{attr} expects a function; use priority=<int> as a keyword")
            return mark(func)
        return mark

    return decorator


stop = _marker(STOP_ATTR)
cleanup = _marker(CLEANUP_ATTR)


def collect_marked(obj: object, attr: str) -> list[tuple[str, Callable[..., Any]]]:
    """Bound methods of `obj` carrying `attr`, sorted by priority (high first), then name."""
    found: dict[str, int] = {}
    for klass in reversed(type(obj).__mro__):
        for name, value in vars(klass).items():
            priority = getattr(value, attr, None)
            if priority is not None:
                found[name] = priority
            elif name in found:  # overridden without the decorator: no longer marked
                del found[name]
    ordered = sorted(found.items(), key=lambda item: (-item[1], item[0]))
    return [(name, getattr(obj, name)) for name, _ in ordered]
