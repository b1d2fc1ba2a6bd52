"""`load_environment(env_id, **env_args)`: find an environment module and call its factory.

Lookup: `owner/` is dropped and dashes become underscores; an installed module of that name wins;
otherwise `./environments/<module>/` (a `<module>.py` file or a `<module>/` package inside it) is
imported directly, so an environment works before it is installed.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from .arguments import check_env_args
from .environment import Environment
from .errors import EnvironmentLoadError


def module_name(env_id: str) -> str:
    return env_id.strip().split("/")[-1].replace("-", "_")


def local_environment_dirs(root: Path | None = None) -> list[Path]:
    base = (root or Path.cwd()) / "environments"
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and _local_entry(p, p.name) is not None)


def _local_entry(folder: Path, module: str) -> Path | None:
    for candidate in (folder / f"{module}.py", folder / module / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _import_local(module: str, root: Path | None) -> Any | None:
    folder = (root or Path.cwd()) / "environments" / module
    if _local_entry(folder, module) is None:
        return None
    folder_str = str(folder.resolve())
    if folder_str not in sys.path:
        sys.path.insert(0, folder_str)
    importlib.invalidate_caches()
    return importlib.import_module(module)


def _close_matches(module: str, root: Path | None) -> list[str]:
    known = [p.name for p in local_environment_dirs(root)]
    return difflib.get_close_matches(module, known, n=3, cutoff=0.6)


def import_environment_module(env_id: str, root: Path | None = None) -> Any:
    module = module_name(env_id)
    if not module.isidentifier():
        raise EnvironmentLoadError(f"{env_id!r} is not a valid environment id (expected a name like 'reverse-text')")
    if module in sys.modules or importlib.util.find_spec(module) is not None:
        return importlib.import_module(module)
    loaded = _import_local(module, root)
    if loaded is not None:
        return loaded
    hint = ""
    matches = _close_matches(module, root)
    if matches:
        hint = " Did you mean: " + ", ".join(m.replace("_", "-") for m in matches) + "?"
    raise EnvironmentLoadError(
        f"no environment {env_id!r}: no installed module {module!r} and no ./environments/{module}/ folder."
        f"{hint} Install it with `prime env install {env_id}` or create it with `prime env init {env_id}`."
    )


def load_environment(env_id: str, **env_args: Any) -> Environment:
    module = import_environment_module(env_id)
    factory = getattr(module, "load_environment", None)
    if not callable(factory):
        raise EnvironmentLoadError(
            f"module {module.__name__!r} ({getattr(module, '__file__', '?')}) has no load_environment() function; "
            "define `def load_environment(**kwargs) -> vf.Environment` in it"
        )
    check_env_args(env_id, factory, env_args)
    env = factory(**env_args)
    if not isinstance(env, Environment):
        raise EnvironmentLoadError(
            f"{module.__name__}.load_environment() returned {type(env).__name__}, not a prime_cli.envs Environment"
        )
    env.env_id = env.env_id or env_id
    env.env_args = dict(env_args)
    return env
