"""The environment `prime env push` is asked to share: its folder, name, version, module and workspace."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from prime_cli.envs.loader import find_local_environment, module_entry

from .build_backend import builds_in_place
from .errors import WorkspaceError
from .names import module_name


@dataclass
class Project:
    folder: Path
    name: str
    version: str
    module: str
    module_root: Path  # the folder holding the module: the project's, or its src/
    dynamic_version: bool = False

    @property
    def pyproject(self) -> Path:
        return self.folder / "pyproject.toml"

    def where_version_is_set(self) -> str:
        return "where the version is set (it is dynamic)" if self.dynamic_version else f"in {shown(self.pyproject)}"


def shown(path: Path) -> str:
    """`path` relative to the current folder when it is below it: what the user would type."""
    try:
        return os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd().resolve()) else str(path)
    except ValueError:
        return str(path)


def project_folder(target: str) -> Path:
    """`-p`: a folder with a pyproject.toml, or the name of one under ./environments/."""
    folder = Path(target).expanduser()
    if not folder.is_dir() and "/" not in target and os.sep not in target:
        local = find_local_environment(target)  # the loader's rule: dashed folder names, src/ layouts
        folder = local.folder if local is not None else Path("environments") / module_name(target)
    if not folder.is_dir():
        raise WorkspaceError(f"{target} is not a folder nor an environment under ./environments/; give -p the "
                             "environment's folder (the one with its pyproject.toml) or its name")
    if not (folder / "pyproject.toml").is_file():
        raise WorkspaceError(f"{shown(folder)} has no pyproject.toml, so it cannot be built; give -p the environment's "
                             "folder, or create one with `prime env init NAME`")
    return folder.resolve()


def workspace_of(folder: Path) -> Path:
    """The workspace whose configs/endpoints.toml names the indexes: the current folder when it has one,
    else the one an ./environments/<module>/ folder sits in (a push from inside the environment's folder)."""
    candidates = [Path.cwd()]
    if folder.parent.name == "environments":
        candidates.append(folder.parent.parent)
    return next((c for c in candidates if (c / "configs" / "endpoints.toml").is_file()), Path.cwd())


def _module_root(folder: Path, module: str) -> Path | None:
    found = module_entry(folder, module)  # the loader's rule: <module>.py or <module>/, in the folder or src/
    return None if found is None else found[0]


def _dynamic_version(folder: Path) -> str:
    """The version the build backend will give the wheel, asked from it before anything is built."""
    from build.util import project_wheel_metadata  # lazy: start-up

    try:
        return str(project_wheel_metadata(folder, isolated=not builds_in_place(folder))["Version"])
    except Exception as exc:  # the backend's own failure, in its words
        raise WorkspaceError(f"the build backend of {shown(folder)} could not say its version: "
                             f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}") from None


def read_project(folder: Path) -> Project:
    pyproject = folder / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"cannot read {shown(pyproject)}: {exc}") from None
    project = data.get("project") or {}
    name = project.get("name")
    if not isinstance(name, str) or not name:
        raise WorkspaceError(f"{shown(pyproject)} has no [project] name; add name = \"my-env\"")
    if "." in name:
        raise WorkspaceError(f"project name {name!r} has dots, which an environment id cannot have (prime loads "
                             f"NAME from module NAME with - as _); use dashes: {name.replace('.', '-')!r}")
    module = module_name(name)
    root = _module_root(folder, module)
    if root is None:
        raise WorkspaceError(f"prime loads environment {name!r} from the module {module!r}, and {shown(folder)} has "
                             f"no {module}.py nor {module}/__init__.py (nor under src/); name the module {module}")
    dynamic = "version" in (project.get("dynamic") or [])
    version = project.get("version")
    if version is None and not dynamic:
        raise WorkspaceError(f"{shown(pyproject)} has no [project] version; add version = \"0.1.0\"")
    version = _dynamic_version(folder) if dynamic else str(version)
    return Project(folder, name, version, module, root, dynamic)
