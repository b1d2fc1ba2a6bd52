"""The trainer-plugin contract: what `prime train` expects of the object a `prime.trainers` entry point
names. A plugin need not inherit from anything; it only has these members (checked when loaded)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pydantic import BaseModel

API_VERSION = 1
"""The plugin API version this prime speaks; a plugin's `api_version` must equal it."""


@runtime_checkable
class TrainerPlugin(Protocol):
    name: str
    """The name `--trainer NAME` picks it by."""
    api_version: int
    """The version of this contract the plugin implements (API_VERSION)."""
    config_model: type[BaseModel]
    """The pydantic model the TOML config is validated into (prime_cli.train.config.RLConfig or a subclass)."""

    def run(self, config: Any, output_dir: Path, resume_step: int | None = None) -> int:
        """Train with `config` (an instance of `config_model`), writing under `output_dir`; resume from
        checkpoint `resume_step` when given. Returns the process exit code.

        A plugin that accepts a keyword `force: bool` is passed `force=True` for `prime train --force`
        (delete exactly the listed entries that a fresh start finds in the way); one without it refuses
        that flag. A plugin deletes only what a run of its own wrote (see prime_cli.runs.training_folder)."""
        ...
