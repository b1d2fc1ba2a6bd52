"""`prime env install NAME|PATH|OWNER/NAME`: an editable pip install of a local environment into the running
interpreter's environment, or an install from a package index (index_install.py).

Both go through install_guard.py: the environment itself with `--no-deps`, then its declared requirements
without verifiers or PyPI's `prime`, prime's own dependencies pinned at their installed versions."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from prime_cli.envs.loader import find_local_environment

from .build_backend import builds_in_place
from .errors import WorkspaceError
from .install_guard import changes, install_dependencies, plan_dependencies, snapshot
from .names import check_env_name, module_name
from .pip_failure import pip_failure_reason

if TYPE_CHECKING:
    from .index_install import IndexInstallResult, IndexRequest
    from .indexes import PackageIndex


@dataclass
class InstallResult:
    folder: Path
    command: list[str]
    output: str
    skipped: list[str] = field(default_factory=list)  # "skipped verifiers>=0.1: why" lines
    changes: list[str] = field(default_factory=list)  # "added NAME VERSION" / "changed NAME OLD -> NEW" lines


def environment_folder(target: str, root: Path | None = None) -> Path:
    """A path (anything with a separator, or an existing folder) or a name under ./environments/."""
    base = root or Path.cwd()
    looks_like_path = os.sep in target or "/" in target or target.startswith(".")
    if looks_like_path or (base / target / "pyproject.toml").is_file():
        folder = (base / target).expanduser()
        if not folder.is_dir():
            raise WorkspaceError(f"{folder} is not a folder; give an environment name or the path of its folder")
    else:
        name = check_env_name(target)
        local = find_local_environment(name, base)  # the loader's rule: dashed folder names, src/ layouts
        folder = local.folder if local is not None else base / "environments" / module_name(name)
        if not folder.is_dir():
            raise WorkspaceError(f"no ./environments/{module_name(name)}/ folder; create it with "
                                 f"`prime env init {name}` or give the path of the environment's folder")
    if not (folder / "pyproject.toml").is_file():
        raise WorkspaceError(f"{folder} has no pyproject.toml, so pip cannot install it; "
                             "create one with `prime env init NAME` (or add a pyproject.toml with a [project] table)")
    return folder.resolve()


def pip_command(arguments: list[str]) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *arguments]


def editable_arguments(folder: Path) -> list[str]:
    """The environment alone, editable (its dependencies are install_guard's)."""
    arguments = ["--no-deps", "-e", str(folder)]
    if builds_in_place(folder):
        arguments.insert(0, "--no-build-isolation")  # no download of a build backend we already have
    return arguments


def run_pip(arguments: list[str]) -> tuple[int, str]:
    """`pip install ARGUMENTS` in this interpreter's environment: exit code and output."""
    done = subprocess.run(pip_command(arguments), capture_output=True, text=True)
    return done.returncode, (done.stdout + done.stderr).strip()


def declared(folder: Path) -> tuple[str, list[str] | None]:
    """The project name in pyproject.toml and its [project].dependencies (None when they are dynamic)."""
    try:
        project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8")).get("project") or {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"cannot read {folder / 'pyproject.toml'} ({exc}); fix it and retry") from None
    name = project.get("name")
    if not isinstance(name, str) or not name.strip():
        raise WorkspaceError(f"{folder / 'pyproject.toml'} has no [project] name; add one (e.g. name = \"my-env\")")
    if "dependencies" in (project.get("dynamic") or []):
        return name, None
    dependencies = project.get("dependencies") or []
    if not isinstance(dependencies, list) or not all(isinstance(item, str) for item in dependencies):
        raise WorkspaceError(f"[project].dependencies in {folder / 'pyproject.toml'} must be a list of strings")
    return name, dependencies


def install_environment(target: str, root: Path | None = None) -> InstallResult:
    folder = environment_folder(target, root)
    if importlib.util.find_spec("pip") is None:
        raise WorkspaceError(f"pip is not available in {sys.prefix}; install it (python -m ensurepip) and retry")
    name, requires = declared(folder)
    plan = plan_dependencies(name, requires) if requires is not None else None  # refused before pip runs
    before = snapshot()
    command = pip_command(editable_arguments(folder))
    code, output = run_pip(editable_arguments(folder))
    if code != 0:
        raise WorkspaceError(f"pip could not install {folder}: {pip_failure_reason(output)}")
    importlib.invalidate_caches()
    if plan is None:  # dynamic dependencies: what the build wrote into the installed metadata
        plan = plan_dependencies(name, importlib.metadata.distribution(name).requires or [])
    outcome = install_dependencies(plan, run_pip, lambda out: WorkspaceError(
        f"pip could not install the dependencies of {folder}: {pip_failure_reason(out)}"))
    return InstallResult(folder, command, "\n".join([output, outcome.output]).strip(), outcome.skipped,
                         changes(before, snapshot(), name))


def is_local_target(target: str, root: Path | None = None) -> bool:
    """A folder here (a path, or a name with ./environments/<module>/), rather than a name on an index."""
    base = root or Path.cwd()
    text = target.strip()
    if "==" in text:
        return False
    if text.startswith((".", "/", "~")) or os.sep in text.replace("/", ""):
        return True
    if "/" in text:  # a path when that folder exists, else OWNER/NAME
        return (base / text).expanduser().is_dir()
    # as environment_folder decides: a folder named like the environment counts only with its pyproject.toml
    return ((base / text / "pyproject.toml").is_file() or (base / "environments" / module_name(text)).is_dir()
            or find_local_environment(text, base) is not None)


def _index_for(request: IndexRequest, indexes: list[PackageIndex], target: str) -> PackageIndex:
    from .indexes import SETUP_HINT, index_named  # lazy: start-up

    if request.owner is not None:
        try:
            return index_named(request.owner, indexes)
        except WorkspaceError as exc:
            raise WorkspaceError(f"{exc} (and {target} is not a folder here)") from None
    if len(indexes) == 1:
        return indexes[0]
    if not indexes:
        raise WorkspaceError(f"no ./environments/{module_name(request.project)}/ folder and no package index is "
                             f"configured; create it with `prime env init {request.project}`, give the path of the "
                             f"environment's folder, or, to install it from an index, {SETUP_HINT}")
    names = ", ".join(index.name for index in indexes)
    raise WorkspaceError(f"several package indexes are configured ({names}); say which one holds it: "
                         f"`prime env install OWNER/{request.project}` with OWNER one of {names}")


def install_target(target: str, root: Path | None = None,
                   endpoints_path: Path | None = None) -> InstallResult | IndexInstallResult:
    """`prime env install TARGET`: InstallResult (a local folder, editable) or IndexInstallResult."""
    if is_local_target(target, root):
        return install_environment(target, root)
    # an install from an index is the rare case: its modules (configparser among them) stay out of the others
    from .index_install import install_from_index, parse_request  # lazy: start-up
    from .indexes import configured_indexes  # lazy: start-up

    request = parse_request(target)
    indexes = configured_indexes(endpoints_path, root)
    return install_from_index(request, _index_for(request, indexes, target.strip()))
