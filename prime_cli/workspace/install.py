"""`prime env install NAME|PATH`: an editable pip install into the running interpreter's environment."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkspaceError
from .names import check_env_name, module_name


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
    if all(importlib.util.find_spec(name) is not None for name in ("setuptools", "wheel")):
        command.insert(4, "--no-build-isolation")  # no download of a build backend we already have
    return command


def install_environment(target: str, root: Path | None = None) -> InstallResult:
    folder = environment_folder(target, root)
    if importlib.util.find_spec("pip") is None:
        raise WorkspaceError(f"pip is not available in {sys.prefix}; install it (python -m ensurepip) and retry")
    command = pip_command(folder)
    done = subprocess.run(command, capture_output=True, text=True)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        tail = "\n".join(output.splitlines()[-15:])
        raise WorkspaceError(f"pip could not install {folder} (exit {done.returncode}):\n{tail}")
    importlib.invalidate_caches()
    return InstallResult(folder, command, output)
