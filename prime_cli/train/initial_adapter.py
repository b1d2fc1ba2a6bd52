"""`[model] adapter = PATH`: may a run start from this PEFT LoRA adapter? Checked from its adapter_config.json
alone (no torch), so that `--dry-run` and preflight refuse a mismatch in one line before anything starts.

The trainer loads the adapter's weights into the LoRA it builds from `[trainer.model.lora]`
(prime_lora/trainer/model.py), so the two must agree: the same rank (and an MoE's per-weight ranks), the
same alpha (the scaling alpha / r multiplies every weight), the same adapted modules and expert parameters.
The folder is the peft layout the trainer reads; an MoE adapter also needs vLLM's per-expert copy in
`vllm/` (as `prime train` writes it), which vLLM serves from step 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_cli.serve.errors import ServeError
from prime_cli.serve.model_dir import read_adapter

from .lora_targets import lora_targets_for

WEIGHTS_FILE = "adapter_model.safetensors"


def adapter_path(config: Any, base: Path | None = None) -> Path | None:
    """The configured adapter folder (relative to `base` when given), or None."""
    if config.model.adapter is None:
        return None
    path = Path(config.model.adapter).expanduser()
    return path if path.is_absolute() or base is None else base / path


def check_initial_adapter(config: Any, base: Path | None = None) -> str | None:
    """None when `[model] adapter` is unset or fits the run's LoRA; else one line naming the problem and the fix."""
    path = adapter_path(config, base)
    if path is None:
        return None
    where = f"model.adapter {path}"
    if not path.exists():
        return f"{where} does not exist: name a PEFT LoRA adapter folder (e.g. an SFT run's weights/step_N)"
    if not path.is_dir():
        return f"{where} is a file: name the adapter's folder (the one that holds adapter_config.json)"
    try:
        read_adapter(path)
    except ServeError as exc:
        return f"{where}: {exc}"
    if not (path / WEIGHTS_FILE).is_file():
        return f"{where} has no {WEIGHTS_FILE} (the trainer reads safetensors): re-save it with peft's save_pretrained"
    saved = json.loads((path / "adapter_config.json").read_text())
    return _mismatch(where, saved, config)


def _mismatch(where: str, saved: dict[str, Any], config: Any) -> str | None:
    lora = config.trainer.model.lora
    if saved.get("peft_type", "LORA") != "LORA":
        return f"{where} is a {saved.get('peft_type')} adapter, not LoRA: start from a LoRA adapter or remove model.adapter"
    # each of these changes what the adapter computes (rslora scales by alpha/sqrt(r); a layer subset leaves the
    # other layers without weights; fan_in_fan_out transposes them), and this trainer's LoRA has none of them
    for key, plain in (("use_dora", False), ("modules_to_save", None), ("bias", "none"), ("use_rslora", False),
                       ("layers_to_transform", None), ("layers_pattern", None), ("fan_in_fan_out", False)):
        if saved.get(key, plain) not in (plain, [], False):
            return (f"{where} has {key} = {saved[key]!r}, which this trainer's LoRA does not have: start from a "
                    f"plain LoRA adapter (as `prime train` writes) or remove model.adapter")
    if int(saved.get("r", 0)) != lora.rank:
        return (f"{where} has LoRA rank {saved.get('r')} but trainer.model.lora.rank is {lora.rank}: set "
                f"trainer.model.lora.rank = {saved.get('r')} to match the adapter")
    if float(saved.get("lora_alpha", 0)) != lora.alpha:
        return (f"{where} has lora_alpha {saved.get('lora_alpha')} but trainer.model.lora.alpha is {lora.alpha:g}: "
                f"set trainer.model.lora.alpha = {saved.get('lora_alpha')} to match the adapter")
    targets = lora_targets_for(config)
    modules = saved.get("target_modules")
    if not isinstance(modules, list):
        return (f"{where} names its target modules as the pattern {modules!r}, not a list: start from an adapter "
                "that lists them (as `prime train` writes) or remove model.adapter")
    if set(modules) != set(targets.modules):
        return (f"{where} adapts {', '.join(sorted(modules))} but trainer.model.lora.target_modules adapts "
                f"{', '.join(sorted(targets.modules))}: set trainer.model.lora.target_modules = "
                f"{json.dumps(sorted(modules))} to match the adapter")
    parameters = saved.get("target_parameters") or []
    if set(parameters) != set(targets.parameters):
        return (f"{where} adapts the expert parameters {', '.join(sorted(parameters)) or 'none'} but this run "
                f"adapts {', '.join(sorted(targets.parameters)) or 'none'}: name the same experts in "
                "trainer.model.lora.target_modules as the run that wrote the adapter")
    for key, ours in (("rank_pattern", targets.rank_pattern), ("alpha_pattern", targets.alpha_pattern)):
        theirs = {k: float(v) for k, v in (saved.get(key) or {}).items()}
        if theirs != {k: float(v) for k, v in ours.items()}:
            return (f"{where} has {key} {theirs or '{}'} but this run's LoRA has {key} "
                    f"{dict(ours) or '{}'}: start from an adapter written with the same trainer.model.lora")
    return None
