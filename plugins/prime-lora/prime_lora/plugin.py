"""The object `prime train` finds through the `prime.trainers` entry point.

Importing this module must stay cheap (no torch): `prime train --dry-run` loads it to validate.
"""

from __future__ import annotations

from pathlib import Path

from prime_cli.train.plugin_api import RLConfig, TrainerPlugin

from . import __version__


class LoraTrainerPlugin:
    name = "lora"
    api_version = 2
    version = __version__
    config_model = RLConfig
    description = "LoRA RL: vLLM inference, an orchestrator over prime environments, a torch + peft trainer"

    def run(self, config: RLConfig, output_dir: Path, resume_step: int | None = None, force: bool = False,
            part: str | None = None, node_rank: int = 0) -> int:
        from .launcher import launch

        return launch(config, Path(output_dir), resume_step, force, part, node_rank)

    def run_slurm(self, config: RLConfig, output_dir: Path, resume_step: int | None, dry_run: bool,
                  template: Path | None, echo) -> int:
        """[slurm]: write the run's sbatch script under OUTPUT_DIR/slurm/ and submit it (not with dry_run)."""
        from .slurm import run_slurm

        return run_slurm(config, Path(output_dir), resume_step, dry_run, template, echo)


plugin: TrainerPlugin = LoraTrainerPlugin()
