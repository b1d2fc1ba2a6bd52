"""Training run folders as a run leaves them, written by hand for run_dir tests: whole checkpoints in
the formats the trainer writes (torch zip archives, a safetensors adapter, JSON), the config.json of a
run, metrics lines."""

from __future__ import annotations

import json
from pathlib import Path

from lora_tiny import config_with

from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import TrainingRunLayout, write_manifest


def rl_config(output_dir: Path, **overrides) -> RLConfig:
    data = {"max_steps": 6, "output_dir": str(output_dir),
            "trainer": {"model": {"lora": {"rank": 8, "alpha": 16}}},
            "orchestrator": {"batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "reverse-text"}]}}
    return config_with(data, overrides)


def write_adapter(folder: Path) -> None:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 8}))
    save_file({"lora_A.weight": torch.zeros(8, 4)}, str(folder / "adapter_model.safetensors"))


def write_checkpoint(out: Path, step: int) -> None:
    """weights/step_N and checkpoints/step_N/{trainer/, orchestrator.json}, whole."""
    import torch

    layout = TrainingRunLayout(out)
    write_adapter(layout.weights_dir(step))
    trainer = layout.trainer_checkpoint(step)
    write_adapter(trainer)
    for name in ("trainable.pt", "optimizer.pt", "scheduler.pt", "rng.pt"):
        torch.save({"step": step, "tensor": torch.zeros(64)}, trainer / name)
    (trainer / "state.json").write_text(json.dumps({"step": step}))
    layout.orchestrator_checkpoint(step).write_text(json.dumps({"step": step, "sampler": {"epoch": 0}}))


def write_run(out: Path, steps: int, checkpoints: tuple[int, ...], config: RLConfig | None = None,
              manifest: bool = True) -> RLConfig:
    """A run trained up to `steps` with checkpoints at the given steps (weights/step_N of every step)."""
    config = config or rl_config(out, max_steps=steps)
    layout = TrainingRunLayout(out)
    out.mkdir(parents=True, exist_ok=True)
    if manifest:
        write_manifest(layout)
    layout.config_path.write_text(config.model_dump_json(indent=2))
    for step in range(0, steps + 1):
        if step in checkpoints:
            write_checkpoint(out, step)
        else:
            write_adapter(layout.weights_dir(step))
        if step:
            layout.rollouts_dir(step).mkdir(parents=True, exist_ok=True)
    layout.metrics_path.write_text("".join(json.dumps({"step": s, "reward_mean": 0.1 * s}) + "\n"
                                           for s in range(1, steps + 1)))
    return config
