"""`load_environment(env_id, **env_args)`: find an environment module and call its factory.

Lookup: `owner/` is dropped and dashes become underscores (`owner/my-env` is my-env published on the
package index named `owner`, installed with `prime env install owner/my-env`). A local environment folder
wins: it is what the user is editing, and it works before it is installed. When an installed module of that
name comes from somewhere else, a `LocalEnvironmentWarning` says which one is used and how to install the
local one. Without a local folder, the installed module is imported.

Which folders are environments (one rule, used by `prime env list/info/check/install/push` and `prime eval
run`): `environments/<folder>/` is the environment whose module is named like its pyproject's project (dashes
as underscores), else like the folder, when that module is there as `<module>.py` or `<module>/__init__.py`,
directly in the folder or under its `src/`. So `environments/my-env/my_env.py` is `my-env`, and
`environments/foo/src/foo/__init__.py` (the layout `prime env push` builds) is `foo`.

Whatever the environment's own code raises while its module is imported or `load_environment()` runs
becomes one `EnvironmentCodeError` line (load_errors.py), the original error as its `__cause__`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.machinery
import importlib.util
import sys
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import verifiers_alias
from .arguments import check_env_args
from .environment import Environment
from .errors import EnvironmentLoadError, EnvironmentNotInstalledError, UserInputError
from .load_errors import code_failure, empty_rubric, not_an_environment

# environments prime itself provides, by id: `prime eval run harbor -a '{"path": "tasks/"}'`
BUILTIN_ENVIRONMENTS = {"harbor": "prime_cli.envs.v1.harbor"}


def module_name(env_id: str) -> str:
    return env_id.strip().split("/")[-1].replace("-", "_")


def environment_exists(env_id: str, root: Path | None = None) -> bool:
    """`env_id` names a local environment folder or an installed module (found, not imported)."""
    module = module_name(env_id)
    if not module.isidentifier():
        return False
    if find_local_environment(env_id, root) is not None or module in sys.modules or module in BUILTIN_ENVIRONMENTS:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class LocalEnvironment:
    """An environment folder under ./environments/ (the rule: this module's docstring)."""

    name: str  # its id: the pyproject's project name, else the folder's name (lower case, `_` as `-`)
    module: str  # the module it is imported as
    folder: Path  # environments/<folder>/
    module_root: Path  # the folder holding the module: `folder` or `folder/src` (put on sys.path)
    entry: Path  # <module>.py or <module>/__init__.py

    @property
    def pyproject(self) -> Path:
        return self.folder / "pyproject.toml"


def module_entry(folder: Path, module: str) -> tuple[Path, Path] | None:
    """(module root, entry file) of `module` in `folder` or `folder/src`, else None."""
    for root in (folder, folder / "src"):
        for candidate in (root / f"{module}.py", root / module / "__init__.py"):
            if candidate.is_file():
                return root, candidate
    return None


def project_name(folder: Path) -> str | None:
    """The [project] name of `folder/pyproject.toml`, None without a readable one."""
    try:
        name = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8")).get("project", {}).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return None
    return name.strip() if isinstance(name, str) and name.strip() else None


def read_local_environment(folder: Path) -> LocalEnvironment | None:
    """The environment `folder` is, or None when it is none (no module named like its project or itself)."""
    if not folder.is_dir():
        return None
    for name in dict.fromkeys(n for n in (project_name(folder), folder.name) if n):
        module = module_name(name)
        found = module_entry(folder, module) if module.isidentifier() else None
        if found is not None:
            return LocalEnvironment(name.replace("_", "-").lower(), module, folder, *found)
    return None


def local_environments(root: Path | None = None) -> list[LocalEnvironment]:
    """Every environment folder under ./environments/, by folder name (the first of two with one module)."""
    base = (root or Path.cwd()) / "environments"
    if not base.is_dir():
        return []
    found: dict[str, LocalEnvironment] = {}
    for folder in sorted(base.iterdir()):
        env = read_local_environment(folder)
        if env is not None:
            found.setdefault(env.module, env)
    return list(found.values())


def find_local_environment(env_id: str, root: Path | None = None) -> LocalEnvironment | None:
    """The local environment folder that provides `env_id`'s module, else None."""
    module = module_name(env_id)
    if not module.isidentifier():
        return None
    base = (root or Path.cwd()) / "environments"
    typed = env_id.strip().split("/")[-1]
    for folder in dict.fromkeys((module, module.replace("_", "-"), typed)):  # the usual folder names first
        env = read_local_environment(base / folder) if folder and "/" not in folder else None
        if env is not None and env.module == module:
            return env
    return next((env for env in local_environments(root) if env.module == module), None)


def local_environment_dirs(root: Path | None = None) -> list[Path]:
    return [env.folder for env in local_environments(root)]


class LocalEnvironmentWarning(UserWarning):
    """./environments/<module>/ is used although a different module of that name is installed."""


def installed_origin(module: str) -> Path | None:
    """The file a plain `import <module>` loads (or has loaded), without importing it; None if none."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
        return Path(origin).resolve() if origin else None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin).resolve() if spec is not None and spec.origin and spec.has_location else None


def shadowed_install(module: str, root: Path | None = None) -> Path | None:
    """The installed copy of `module` that its local environment folder takes the place of, if they differ."""
    local = find_local_environment(module, root)
    if local is None:
        return None
    origin = installed_origin(module)
    if origin is None or origin.is_relative_to(local.folder.resolve()):
        return None
    return origin


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the environment's file from its source on every load, never from __pycache__: a .pyc is
    trusted when the source's mtime (whole seconds) and size match, so an edit of the same size within the
    same second (a reward's 0.2 made 0.0) would run the old code, and `prime eval rescore` exists to run
    the new one."""

    def get_code(self, fullname: str) -> Any:
        return self.source_to_code(self.get_data(self.path), self.path)


def _import_local(module: str, root: Path | None) -> Any | None:
    local = find_local_environment(module, root)
    if local is None:
        return None
    folder_str = str(local.module_root.resolve())
    if folder_str not in sys.path:
        sys.path.insert(0, folder_str)  # so that the environment's own sibling modules import too
    importlib.invalidate_caches()
    spec = importlib.machinery.PathFinder.find_spec(module, [folder_str])  # this folder, whatever else is installed
    if spec is None or spec.loader is None:
        return None
    if isinstance(spec.loader, importlib.machinery.SourceFileLoader) and spec.origin:
        spec.loader = _SourceLoader(module, spec.origin)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        sys.modules.pop(module, None)
        raise
    return loaded


def _versions(module: str, folder: Path) -> tuple[str, str]:
    """(" 1.2" style suffixes for the local and the installed version), empty when unknown."""
    import importlib.metadata  # lazy: start-up
    import tomllib  # lazy: already loaded

    local = installed = ""
    try:
        local = f", {tomllib.loads((folder / 'pyproject.toml').read_text(encoding='utf-8'))['project']['version']}"
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        pass
    for name in (module.replace("_", "-"), module):
        try:
            installed = f" {importlib.metadata.version(name)}"
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    return local, installed


def _warn_shadowed(module: str, origin: Path, root: Path | None, already_imported: bool) -> None:
    folder = (root or Path.cwd()) / "environments" / module
    if (found := find_local_environment(module, root)) is not None:
        folder = found.folder
    local, installed = _versions(module, folder)
    where = origin.parent if origin.name != "__init__.py" else origin.parent.parent
    dist = module.replace("_", "-")
    if already_imported:  # this process imported the other copy before: it cannot be swapped safely
        message = (f"{dist}: using the copy imported earlier in this process from {where}, not "
                   f"./environments/{folder.name}/ (local{local}); a new process will load the local one")
    else:
        message = (f"{dist}: using ./environments/{folder.name}/ (local{local}), not the installed {dist}{installed} "
                   f"in {where}; `prime env install {dist}` installs the local one")
    warnings.warn(message, LocalEnvironmentWarning, stacklevel=4)


def _close_matches(module: str, root: Path | None) -> list[str]:
    known = [env.module for env in local_environments(root)]
    return difflib.get_close_matches(module, known, n=3, cutoff=0.6)


def malformed_id(env_id: str) -> str | None:
    """Why `env_id` (e.g. `a/b/c`) is no id at all, else None."""
    if env_id.strip().count("/") > 1:
        return f"{env_id.strip()!r} is not an environment id: an id is NAME or OWNER/NAME (e.g. team/my-env)"
    return None


def missing_owned_environment(env_id: str, module: str) -> str:
    """Why `owner/my-env` cannot be used, and the one command that installs it."""
    return (f"no environment {env_id!r} is installed (module {module}): "
            f"install it with `prime env install {env_id}`")


def _code_place(module: str, root: Path | None) -> Path | None:
    """Where the environment's own code is (its local folder, else the installed package or file), to say
    where an error was raised."""
    local = find_local_environment(module, root)
    if local is not None:
        return local.folder
    origin = installed_origin(module)
    return None if origin is None else origin.parent if origin.name == "__init__.py" else origin


def _import(module: str, root: Path | None) -> Any | None:
    shadowed = shadowed_install(module, root)
    if shadowed is not None:
        _warn_shadowed(module, shadowed, root, already_imported=module in sys.modules)
        loaded = sys.modules.get(module) or _import_local(module, root)
        if loaded is not None:
            return loaded
    if module in sys.modules or importlib.util.find_spec(module) is not None:
        return importlib.import_module(module)  # installed, the local folder itself, or imported already
    return _import_local(module, root)


def import_environment_module(env_id: str, root: Path | None = None) -> Any:
    verifiers_alias.install()  # `import verifiers` in the environment means prime's API (verifiers_alias.py)
    module = module_name(env_id)
    if problem := malformed_id(env_id):
        raise EnvironmentLoadError(problem)
    if not module.isidentifier():
        raise EnvironmentLoadError(f"{env_id!r} is not a valid environment id (expected a name like 'reverse-text')")
    try:
        loaded = _import(module, root)
    except UserInputError:
        raise
    except Exception as exc:  # the environment's module raised while it was imported: one line, cause kept
        raise code_failure(env_id.strip(), exc, "importing its module", _code_place(module, root)) from exc
    if loaded is not None:
        return loaded
    if module in BUILTIN_ENVIRONMENTS:  # after a local folder or an installed module of that name
        return importlib.import_module(BUILTIN_ENVIRONMENTS[module])
    if "/" in env_id.strip():  # a published environment: the index named by its owner has it
        raise EnvironmentNotInstalledError(missing_owned_environment(env_id.strip(), module))
    hint = ""
    matches = _close_matches(module, root)
    if matches:
        hint = " Did you mean: " + ", ".join(m.replace("_", "-") for m in matches) + "?"
    raise EnvironmentLoadError(
        f"no environment {env_id!r}: no installed module {module!r} and no ./environments/{module}/ folder."
        f"{hint} Install it with `prime env install {env_id}` or create it with `prime env init {env_id}`."
    )


def load_environment(env_id: str, **env_args: Any) -> Environment:
    """Import `env_id`'s module and return its `load_environment(**env_args)`. Whatever goes wrong is an
    EnvConfigError of one line: a missing module or factory, bad arguments, the environment's own code raising
    (`EnvironmentCodeError`, the original as its cause), no Environment returned, a rubric with no reward
    function (in it or in an EnvGroup child)."""
    env = build_environment(env_id, env_args)
    if (refusal := empty_rubric(env_id.strip(), env)) is not None:
        raise refusal
    return env


def build_environment(env_id: str, env_args: dict[str, Any]) -> Environment:
    """`load_environment` without refusing a rubric that has no reward function (`prime env info` describes
    such an environment and says so)."""
    module = import_environment_module(env_id)  # which installs the verifiers alias first
    factory = getattr(module, "load_environment", None)
    if not callable(factory):
        from .v1.loading import build_taskset_environment  # lazy: start-up

        try:
            taskset_env = build_taskset_environment(env_id.strip(), module, env_args)
        except UserInputError:
            raise
        except Exception as exc:  # the taskset's own code (its config or constructor): one line, cause kept
            raise code_failure(env_id.strip(), exc, "building its taskset", _code_place(module.__name__, None)) from exc
        if taskset_env is not None:
            return taskset_env
        raise EnvironmentLoadError(
            f"module {module.__name__!r} ({getattr(module, '__file__', '?')}) has no load_environment() function; "
            "define `def load_environment(**kwargs) -> vf.Environment` in it, or export a verifiers v1 Taskset"
        )
    check_env_args(env_id, factory, env_args)
    try:
        env = factory(**env_args)
    except UserInputError:
        raise
    except Exception as exc:  # the environment's own code: one line naming the cause, the original as cause
        raise code_failure(env_id.strip(), exc, "load_environment()", _code_place(module.__name__, None)) from exc
    if not isinstance(env, Environment):
        raise not_an_environment(env_id.strip(), module.__name__, env)
    env.env_id = env.env_id or env_id
    env.env_args = dict(env_args)
    return env
