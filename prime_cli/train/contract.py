"""The trainer-plugin contract: what `prime train` expects of the object a `prime.trainers` entry point
names. A plugin need not inherit from anything; it only has these members (checked when loaded), and
prime uses no member that is not listed here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pydantic import BaseModel

API_VERSION = 2
"""The plugin API version this prime speaks; a plugin's `api_version` must equal it. Version 2 added
`version`, `run`'s `force`, `part` and `node_rank`, and `run_slurm`."""

MEMBERS = ("name", "version", "config_model", "run", "run_slurm")
"""The members besides `api_version`, named when a plugin lacks some."""


@runtime_checkable
class TrainerPlugin(Protocol):
    name: str
    """The name `--trainer NAME` picks it by."""
    api_version: int
    """The version of this contract the plugin implements (API_VERSION)."""
    version: str
    """The plugin's own release, shown by `prime train --dry-run`."""
    config_model: type[BaseModel]
    """The pydantic model the TOML config is validated into (prime_cli.train.config.RLConfig or a subclass)."""

    def run(self, config: Any, output_dir: Path, resume_step: int | None = None, force: bool = False,
            part: str | None = None, node_rank: int = 0) -> int:
        """Train with `config` (an instance of `config_model`), writing under `output_dir`; resume from
        checkpoint `resume_step` when given. Returns the process exit code.

        `force` (`prime train --force`): on a fresh start, delete exactly the listed entries that are in the
        way; a plugin deletes only what a run of its own wrote (see prime_cli.records.training_folder).
        `part` ("inference", "trainer" or "orchestrator"; None: all of them here) and `node_rank` (this
        trainer node's place) run one part of a run on several machines. A plugin that cannot do one of
        these raises TrainConfigError (prime_cli.train.plugin_api) with one line saying so."""
        ...

    def run_slurm(self, config: Any, output_dir: Path, resume_step: int | None, dry_run: bool,
                  template: Path | None, echo: Callable[[str], Any]) -> int:
        """A config with a [slurm] table: write the run's batch job (from `template` when given) and submit
        it, or only show it with `dry_run`; `echo` prints a line. Returns the process exit code. A plugin
        that cannot write SLURM jobs raises TrainConfigError with one line saying so."""
        ...
