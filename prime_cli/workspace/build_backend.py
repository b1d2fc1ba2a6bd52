"""Whether a package can be built with the setuptools this Python already has (no isolated build env).

An isolated build downloads its backend (slow, impossible offline) and, for pip, runs a child whose argv
carries every index URL, credentials included; building in place avoids both. setuptools builds wheels on
its own from 70.1; older ones need the `wheel` package.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import tomllib
from pathlib import Path

SETUPTOOLS_BACKEND = "setuptools.build_meta"


def setuptools_builds_wheels() -> bool:
    if importlib.util.find_spec("setuptools") is None:
        return False
    try:
        major, minor = (int(part) for part in importlib.metadata.version("setuptools").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def builds_in_place(folder: Path | None = None) -> bool:
    """True when `folder`'s pyproject (any setuptools project when None) builds with the setuptools at hand."""
    if not setuptools_builds_wheels():
        return False
    if folder is None:
        return True
    try:
        system = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8")).get("build-system") or {}
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return system.get("build-backend", SETUPTOOLS_BACKEND) == SETUPTOOLS_BACKEND  # PEP 517's default without one
