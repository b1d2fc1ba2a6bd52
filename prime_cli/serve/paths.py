"""Where prime keeps materialised models and the records of running servers."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`PRIME_CACHE_DIR`, else `$XDG_CACHE_HOME/prime`, else `~/.cache/prime`."""
    if os.environ.get("PRIME_CACHE_DIR"):
        return Path(os.environ["PRIME_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "prime"


def models_dir() -> Path:
    return cache_dir() / "models"


def servers_dir() -> Path:
    return cache_dir() / "servers"


def logs_dir() -> Path:
    return cache_dir() / "logs"
