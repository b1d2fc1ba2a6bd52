"""Finding and building a v1 taskset from an environment module that has no `load_environment()`.

A v1 environment package exports its `Taskset` subclass (`__all__ = ["ReverseTextTaskset"]`); `-a` / the
environment arguments are its `TasksetConfig` fields (`{"split": "train", "task": {"similarity_power": 2}}`),
checked by pydantic before anything runs."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import EnvConfigError
from .episodes import SingleAgentEnv
from .taskset import Taskset
from .taskset_env import TasksetEnvironment


def exported(module: Any, base: type) -> list[type]:
    """The subclasses of `base` that `module` exports (its `__all__`, else every public name), in that order."""
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    found = []
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, type) and issubclass(value, base) and value is not base and "_v1_params" not in vars(value):
            found.append(value)
    return list(dict.fromkeys(found))


def exported_tasksets(module: Any) -> list[type[Taskset]]:
    return exported(module, Taskset)


def config_problem(env_id: str, error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ())) or "(config)"
        parts.append(f"{where}: {item.get('msg')}")
    return f"{env_id}: bad environment arguments for its taskset config: {'; '.join(parts)}"


def build_taskset_environment(env_id: str, module: Any, env_args: dict[str, Any]) -> TasksetEnvironment | None:
    """The prime environment of the v1 taskset `module` exports, or None when it exports none."""
    tasksets = exported_tasksets(module)
    if not tasksets:
        return None
    if len(tasksets) > 1:
        names = ", ".join(t.__name__ for t in tasksets)
        raise EnvConfigError(f"{env_id}: its module exports {len(tasksets)} tasksets ({names}); export one in __all__")
    taskset_type = tasksets[0]
    config_type = taskset_type.config_type()
    try:
        config = config_type(**env_args)
    except ValidationError as exc:
        raise EnvConfigError(config_problem(env_id, exc)) from None
    episodes = exported(module, SingleAgentEnv)
    if len(episodes) > 1:
        raise EnvConfigError(f"{env_id}: its module exports {len(episodes)} environments "
                             f"({', '.join(e.__name__ for e in episodes)}); export one in __all__")
    episode = episodes[0]() if episodes else None
    return TasksetEnvironment(taskset_type(config), env_id=env_id, env_args=env_args, episode=episode)
