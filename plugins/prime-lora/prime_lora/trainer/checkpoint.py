"""What the trainer writes: the adapter after every step, and full checkpoints to resume from.

Both are written to a hidden temporary folder and renamed, so a folder that exists is complete.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from prime_cli.train.plugin_api import TrainingRunLayout, moe_shape

from ..moe_adapter import write_vllm_moe_adapter
from .distributed import Dist
from .fsdp import full_optimizer_state, full_trainable_state, load_full_state, plain_name

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "vocab.json", "merges.txt", "generation_config.json")


def _publish(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def save_weights(model: Any, output_dir: Path, step: int, merged: bool = False, model_path: str | None = None,
                 dist: Dist = Dist()) -> Path:
    """weights/step_N/: a PEFT adapter (and merged/, a full model, on request). Every rank calls it (the
    weights are gathered from the ranks' shards); the main rank writes."""
    final = TrainingRunLayout(output_dir).weights_dir(step)
    weights = full_trainable_state(model) if dist.sharded else None
    if not dist.is_main:
        return final
    tmp = final.with_name(f".tmp-{final.name}")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, state_dict=weights)
    experts = moe_shape(model.config.to_dict())
    if experts is not None:  # vLLM's per-expert layout beside peft's fused one (moe_adapter.py)
        write_vllm_moe_adapter(tmp, experts.experts, type(model.get_base_model()).__name__,
                               fused_expert_parameters(model))
    if merged:
        _save_merged(model, tmp, model_path, from_disk=dist.sharded)
    _publish(tmp, final)
    return final


def _save_merged(model: Any, folder: Path, model_path: str | None, from_disk: bool) -> None:
    """folder/merged/: base + adapter as one model. A sharded model has no full weights in memory: the
    base is read from model_path on the CPU and the adapter just written is applied to it. Otherwise the
    merged weights are computed tensor by tensor into CPU memory: the training model is not copied or
    changed."""
    if from_disk:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        if not model_path:
            raise RuntimeError("trainer.save_merged with a sharded trainer needs the model's local folder")
        base = AutoModelForCausalLM.from_pretrained(model_path, dtype=next(model.parameters()).dtype)
        full = PeftModel.from_pretrained(base, str(folder)).merge_and_unload()
        full.save_pretrained(folder / "merged")
    else:
        base = model.get_base_model()
        base.save_pretrained(folder / "merged", state_dict=merged_state_dict(model))
    if model_path and Path(model_path).is_dir():
        for name in TOKENIZER_FILES:
            if (Path(model_path) / name).exists():
                shutil.copy2(Path(model_path) / name, folder / "merged" / name)


@torch.no_grad()
def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The base model's state dict (plain names) with each LoRA layer's delta added, on the CPU."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    delta = module.get_delta_weight(adapter).to("cpu", torch.float32)
                    key = plain_name(merged_key(name, module))
                    deltas[key] = deltas.get(key, 0) + delta
    out: dict[str, torch.Tensor] = {}
    for key, tensor in base.state_dict().items():
        if ".lora_" in key:
            continue
        plain = key.replace(".base_layer", "")  # nested wrappers (an MoE's experts) have several
        value = tensor.detach().to("cpu", copy=True)
        if plain in deltas:
            value = (value.float() + deltas[plain]).to(tensor.dtype)
        out[plain] = value
    return out


def fused_expert_parameters(model: Any) -> dict[str, str]:
    """Each parameter wrapper's module name (as the adapter file names it) -> the parameter it adapts."""
    return {plain_name(name): module.parameter_name for name, module in model.named_modules()
            if getattr(module, "parameter_name", None) and getattr(module, "lora_A", None)}


def merged_key(name: str, module: Any) -> str:
    """The state-dict key of the weight a LoRA layer adapts: `<module>.weight`, or for peft's parameter
    wrappers (an MoE's fused experts) the parameter's own name on the wrapped module, whose nesting
    (`experts.base_layer`) the plain name does not have."""
    parameter = getattr(module, "parameter_name", None)
    if parameter is None:
        return f"{name}.weight"
    return f"{name.replace('.base_layer', '')}.{parameter}"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(model: Any, optimizer: Any, scheduler: Any, output_dir: Path, step: int, keep: Any = None,
                    dist: Dist = Dist()) -> Path:
    """checkpoints/step_N/: trainer/ (adapter, full LoRA weights and optimizer state by parameter name, so a
    run resumes on any number of ranks; scheduler, RNG of every rank, the step) and orchestrator.json (the
    orchestrator's progress after batch N, copied from rollouts/step_N). Written whole into a hidden folder
    and renamed: a checkpoints/step_N that exists can be resumed from. Every rank calls it."""
    layout = TrainingRunLayout(output_dir)
    final = layout.checkpoint_dir(step)
    tmp = final.with_name(f".tmp-{final.name}")
    weights, optim_state = full_trainable_state(model), full_optimizer_state(model, optimizer)
    if dist.is_main:
        if tmp.exists():  # left by a save that was killed
            shutil.rmtree(tmp)
        trainer = tmp / layout.TRAINER_CHECKPOINT
        model.save_pretrained(trainer, state_dict=weights)
        torch.save(weights, trainer / "trainable.pt")
        torch.save(optim_state, trainer / "optimizer.pt")
        torch.save(scheduler.state_dict(), trainer / "scheduler.pt")
        torch.save(rng_state(), trainer / "rng.pt")
        (trainer / "state.json").write_text(json.dumps({"step": step}))
        progress = layout.orchestrator_progress(step)
        if progress.is_file():
            shutil.copyfile(progress, tmp / layout.ORCHESTRATOR_CHECKPOINT)
    if dist.world > 1:  # every rank's RNG, so a resume continues each exactly
        dist.barrier()
        if not dist.is_main:
            torch.save(rng_state(), tmp / layout.TRAINER_CHECKPOINT / f"rng_rank{dist.rank}.pt")
        dist.barrier()
    if dist.is_main:
        _publish(tmp, final)
        if keep is not None and keep.keep_last:
            prune_checkpoints(output_dir, keep.keep_last, keep.keep_interval)
    return layout.trainer_checkpoint(step)


def prune_checkpoints(output_dir: Path, keep_last: int, keep_interval: int | None = None) -> None:
    """Keep the newest `keep_last` checkpoints, and every one whose step is a multiple of `keep_interval`;
    a pruned step's folder goes whole (its orchestrator.json alone would look like a checkpoint)."""
    layout = TrainingRunLayout(output_dir)
    steps = [step for step in layout.steps(layout.CHECKPOINTS) if layout.trainer_checkpoint(step).is_dir()]
    for step in steps[:-keep_last]:
        if keep_interval and step % keep_interval == 0:
            continue
        shutil.rmtree(layout.checkpoint_dir(step))


def prune_weights(output_dir: Path, max_async_level: int, keep: set[int] | frozenset[int] = frozenset()) -> None:
    """weights/step_N that nothing needs any more are removed. Kept: step_0 (the untrained adapter, the
    baseline to compare with), the newest max_async_level + 1 steps
    (the orchestrator may still load any of them; at least 2, so the one it is loading is never removed
    under it), the steps with a trainer checkpoint (a resume from step N loads weights/step_N) and the
    steps in `keep` (those [orchestrator.eval] evaluates: the orchestrator loads them, and a user who
    reads the eval curve can serve the adapter it measured)."""
    layout = TrainingRunLayout(output_dir)
    steps = layout.steps(layout.WEIGHTS)
    checkpointed = {step for step in layout.steps(layout.CHECKPOINTS) if layout.trainer_checkpoint(step).is_dir()}
    for step in steps[: -max(max_async_level + 1, 2)]:
        if step and step not in checkpointed and step not in keep:
            shutil.rmtree(layout.weights_dir(step), ignore_errors=True)


def load_checkpoint(model: Any, optimizer: Any, scheduler: Any, output_dir: Path, step: int, rank: int = 0) -> None:
    folder = TrainingRunLayout(output_dir).trainer_checkpoint(step)
    weights = torch.load(folder / "trainable.pt", weights_only=True)
    names = {plain_name(name) for name, p in model.named_parameters() if p.requires_grad}
    if set(weights) != names:
        missing = sorted(names - set(weights)) or sorted(set(weights) - names)
        raise RuntimeError(f"checkpoint {folder} does not match the model (e.g. {missing[0]}): "
                           "was it written with another LoRA config?")
    load_full_state(model, optimizer, weights, torch.load(folder / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=False))
    rank_rng = folder / f"rng_rank{rank}.pt"
    restore_rng(torch.load(rank_rng if rank and rank_rng.exists() else folder / "rng.pt", weights_only=False))
