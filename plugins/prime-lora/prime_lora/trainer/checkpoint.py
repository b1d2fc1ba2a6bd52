"""What the trainer writes: the adapter after every step, and full checkpoints to resume from.

Both are written to a hidden temporary folder and renamed, so a folder that exists is complete.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from prime_cli.train.plugin_api import TrainingRunLayout

from .distributed import Dist
from .fsdp import full_optimizer_state, full_trainable_state, load_full_state

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
    if merged:
        _save_merged(model, tmp, model_path, from_disk=dist.sharded)
    _publish(tmp, final)
    return final


def _save_merged(model: Any, folder: Path, model_path: str | None, from_disk: bool) -> None:
    """folder/merged/: base + adapter as one model. A sharded model has no full weights in memory: the
    base is read from model_path on the CPU and the adapter just written is applied to it."""
    if from_disk:
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        if not model_path:
            raise RuntimeError("trainer.save_merged with a sharded trainer needs the model's local folder")
        base = AutoModelForCausalLM.from_pretrained(model_path, dtype=next(model.parameters()).dtype)
        full = PeftModel.from_pretrained(base, str(folder)).merge_and_unload()
    else:
        full = copy.deepcopy(model).merge_and_unload()
    full.save_pretrained(folder / "merged")
    if model_path and Path(model_path).is_dir():
        for name in TOKENIZER_FILES:
            if (Path(model_path) / name).exists():
                shutil.copy2(Path(model_path) / name, folder / "merged" / name)


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


def save_checkpoint(model: Any, optimizer: Any, scheduler: Any, output_dir: Path, step: int, keep: int | None,
                    dist: Dist = Dist()) -> Path:
    """checkpoints/step_N/trainer/: adapter, full LoRA weights and optimizer state by parameter name (so a
    run resumes on any number of ranks), scheduler, RNG of every rank, the step. Every rank calls it."""
    final = TrainingRunLayout(output_dir).trainer_checkpoint(step)
    weights, optim_state = full_trainable_state(model), full_optimizer_state(model, optimizer)
    if dist.is_main:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(".tmp-trainer")
        if tmp.exists():
            shutil.rmtree(tmp)
        model.save_pretrained(tmp, state_dict=weights)
        torch.save(weights, tmp / "trainable.pt")
        torch.save(optim_state, tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        (tmp / "state.json").write_text(json.dumps({"step": step}))
        _publish(tmp, final)
        if keep:
            prune_checkpoints(output_dir, keep)
    if dist.world > 1:  # every rank's RNG, so a resume continues each exactly
        dist.barrier()
        if not dist.is_main:
            torch.save(rng_state(), final / f"rng_rank{dist.rank}.pt")
        dist.barrier()
    return final


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Keep the newest `keep` trainer checkpoints (the orchestrator's small files stay)."""
    layout = TrainingRunLayout(output_dir)
    steps = [step for step in layout.steps(layout.CHECKPOINTS) if layout.trainer_checkpoint(step).is_dir()]
    for step in steps[:-keep]:
        shutil.rmtree(layout.trainer_checkpoint(step))


def load_checkpoint(model: Any, optimizer: Any, scheduler: Any, output_dir: Path, step: int, rank: int = 0) -> None:
    folder = TrainingRunLayout(output_dir).trainer_checkpoint(step)
    weights = torch.load(folder / "trainable.pt", weights_only=True)
    names = {name for name, p in model.named_parameters() if p.requires_grad}
    if set(weights) != names:
        missing = sorted(names - set(weights)) or sorted(set(weights) - names)
        raise RuntimeError(f"checkpoint {folder} does not match the model (e.g. {missing[0]}): "
                           "was it written with another LoRA config?")
    load_full_state(model, optimizer, weights, torch.load(folder / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=False))
    rank_rng = folder / f"rng_rank{rank}.pt"
    restore_rng(torch.load(rank_rng if rank and rank_rng.exists() else folder / "rng.pt", weights_only=False))
