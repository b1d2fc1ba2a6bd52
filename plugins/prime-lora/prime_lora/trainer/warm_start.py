"""`[model] adapter = PATH`: the policy starts from a saved PEFT LoRA adapter instead of B = 0.

prime_cli.train.initial_adapter checked its config against the run's LoRA before the run started; here every
tensor of its adapter_model.safetensors must land on a LoRA weight of the policy with the same shape, and
every LoRA weight must get one (a partly loaded adapter would train from a model nobody asked for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

WEIGHTS_FILE = "adapter_model.safetensors"


def load_initial_adapter(model: Any, folder: Path) -> int:
    """Loads the adapter in `folder` into the peft `model` (before any wrapping: activation checkpointing and
    torch.compile rename its modules); returns the tensors loaded. Raises ValueError naming what does not fit."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS_FILE
    if not path.is_file():
        raise ValueError(f"model.adapter {folder} has no {WEIGHTS_FILE}: name a PEFT LoRA adapter folder "
                         "(e.g. an SFT run's weights/step_N)")
    weights = load_file(str(path))
    expected = get_peft_model_state_dict(model)
    missing, unexpected = sorted(expected.keys() - weights.keys()), sorted(weights.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(f"model.adapter {folder} does not fit the policy's LoRA: "
                         f"{len(missing)} weights missing (e.g. {missing[:2]}), {len(unexpected)} unexpected "
                         f"(e.g. {unexpected[:2]}); was it written for another model or trainer.model.lora?")
    shapes = [(key, tuple(weights[key].shape), tuple(expected[key].shape)) for key in sorted(expected)
              if weights[key].shape != expected[key].shape]
    if shapes:
        key, theirs, ours = shapes[0]
        raise ValueError(f"model.adapter {folder}: {len(shapes)} weights have another shape than the policy's "
                         f"(e.g. {key}: {theirs} in the adapter, {ours} here); was it written for another model "
                         "or LoRA rank?")
    with torch.no_grad():
        result = set_peft_model_state_dict(model, weights)
    if result.unexpected_keys:  # every key was checked above: peft placing one elsewhere is a bug here
        raise RuntimeError(f"peft did not place {result.unexpected_keys[:2]} of {folder}")
    return len(weights)
