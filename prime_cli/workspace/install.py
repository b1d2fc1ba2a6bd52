"""`prime env install NAME|PATH|OWNER/NAME`: an editable pip install of a local environment into the running
interpreter's environment, or an install from a package index (index_install.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .build_backend import builds_in_place
from .errors import WorkspaceError
from .names import check_env_name, module_name

if TYPE_CHECKING:
    from .index_install import IndexInstallResult, IndexRequest
    from .indexes import PackageIndex


@dataclass
class InstallResult:
    folder: Path
    command: list[str]
    output: str


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
        folder = base / "environments" / module_name(name)
        if not folder.is_dir():
            raise WorkspaceError(f"no ./environments/{module_name(name)}/ folder; create it with "
                                 f"`prime env init {name}` or give the path of the environment's folder")
    if not (folder / "pyproject.toml").is_file():
        raise WorkspaceError(f"{folder} has no pyproject.toml, so pip cannot install it; "
                             "create one with `prime env init NAME` (or add a pyproject.toml with a [project] table)")
    return folder.resolve()


def pip_command(folder: Path) -> list[str]:
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-e", str(folder)]
    if builds_in_place(folder):
        command.insert(4, "--no-build-isolation")  # no download of a build backend we already have
    return command


# pip's lines that say why an install failed, most telling first
TELLING = ("No matching distribution", "Could not find a version", "requires a different Python",
           "Could not build", "Failed to build", "ResolutionImpossible", "conflicting dependencies",
           "ModuleNotFoundError", "No module named", "BackendUnavailable")


def pip_failure_reason(output: str) -> str:
    """The one line of a failed pip's output that says the most (it prints many, and retries)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for phrase in TELLING:
        for line in lines:
            if phrase in line:
                return line.removeprefix("ERROR: ")
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR:")]
    return errors[0] if errors else (lines[-1] if lines else "pip printed nothing")


def install_environment(target: str, root: Path | None = None) -> InstallResult:
    folder = environment_folder(target, root)
    if importlib.util.find_spec("pip") is None:
        raise WorkspaceError(f"pip is not available in {sys.prefix}; install it (python -m ensurepip) and retry")
    command = pip_command(folder)
    done = subprocess.run(command, capture_output=True, text=True)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        raise WorkspaceError(f"pip could not install {folder}: {pip_failure_reason(output)}")
    importlib.invalidate_caches()
    return InstallResult(folder, command, output)


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
    return (base / text / "pyproject.toml").is_file() or (base / "environments" / module_name(text)).is_dir()


def _index_for(request: IndexRequest, indexes: list[PackageIndex], target: str) -> PackageIndex:
    from .indexes import SETUP_HINT, index_named

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
    from .index_install import install_from_index, parse_request
    from .indexes import configured_indexes

    request = parse_request(target)
    indexes = configured_indexes(endpoints_path, root)
    return install_from_index(request, _index_for(request, indexes, target.strip()))
