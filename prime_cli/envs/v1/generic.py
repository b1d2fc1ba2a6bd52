"""`Task[Data]`, `Task[Data, State, Config]`, `Taskset[Task, Config]`, `Toolset[Config, State]`: verifiers'
v1 classes are subscripted with the types they work with, any trailing ones left out. Subscripting here
makes (once per set of types) a subclass that remembers them, and `parameter(cls, base)` finds the
subclass of `base` among the types a class was built with (the data class a task's rows are, the config
class a taskset is made with), through its bases."""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


class Subscriptable:
    _v1_params: tuple[Any, ...] = ()

    def __class_getitem__(cls, params: Any) -> type:
        return _subscripted(cls, params if isinstance(params, tuple) else (params,))


@cache
def _subscripted(cls: type, params: tuple[Any, ...]) -> type:
    names = ", ".join(getattr(p, "__name__", repr(p)) for p in params)
    return type(f"{cls.__name__}[{names}]", (cls,), {"_v1_params": params, "__module__": cls.__module__})


def parameter(cls: type, base: type[T]) -> type[T] | None:
    """The first subclass of `base` among the types `cls` (or a class it derives from) was subscripted with."""
    for klass in cls.__mro__:
        for param in vars(klass).get("_v1_params", ()):
            if isinstance(param, type) and issubclass(param, base):
                return param
    return None
