"""The models prime builds itself, by the names users give them (`-m local`, `-m local-moe`).

The names are prime_cli.clients.command_flags' LOCAL_MODEL and LOCAL_MOE_MODEL (serve and clients
may not import each other; a test keeps the two lists equal).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .embedded import EMBEDDED_NAME, Status, ensure_embedded_model
from .local_moe import LOCAL_MOE_NAME, ensure_local_moe_model

BUILTIN_MODELS: dict[str, tuple[str, Callable[[Status], Path]]] = {
    "local": (EMBEDDED_NAME, ensure_embedded_model),
    "local-moe": (LOCAL_MOE_NAME, ensure_local_moe_model),
}
"""name -> (the served model id, the function that returns its verified folder, building it once)."""


def is_builtin(name: str | None) -> bool:
    return name in BUILTIN_MODELS


def served_name(name: str) -> str:
    return BUILTIN_MODELS[name][0]


def builtin_folder(name: str, status: Status = lambda _: None) -> Path:
    """The verified folder of a built-in model, made first when it is missing or damaged."""
    return BUILTIN_MODELS[name][1](status)


def builtin_of_served(model: str) -> str:
    """The built-in name a locally served run's model id stands for (`local` for any other model,
    as `-m local` uses whatever `prime serve` runs)."""
    for name, (served, _) in BUILTIN_MODELS.items():
        if served == model:
            return name
    return "local"
