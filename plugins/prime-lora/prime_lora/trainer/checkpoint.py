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

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "vocab.json", "merges.txt", "generation_config.json")


def _publish(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def save_weights(model: Any, output_dir: Path, step: int, merged: bool = False, model_path: str | None = None) -> Path:
    """weights/step_N/: a PEFT adapter (and merged/, a full model, on request)."""
    final = output_dir / "weights" / f"step_{step}"
    tmp = final.with_name(f".tmp-step_{step}")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    if merged:
        full = copy.deepcopy(model).merge_and_unload()
        full.save_pretrained(tmp / "merged")
        if model_path and Path(model_path).is_dir():
            for name in TOKENIZER_FILES:
                if (Path(model_path) / name).exists():
                    shutil.copy2(Path(model_path) / name, tmp / "merged" / name)
    _publish(tmp, final)
    return final


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


def save_checkpoint(model: Any, optimizer: Any, scheduler: Any, output_dir: Path, step: int, keep: int | None) -> Path:
    """checkpoints/step_N/trainer/: adapter, optimizer, scheduler, RNG and the step."""
    final = output_dir / "checkpoints" / f"step_{step}" / "trainer"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(".tmp-trainer")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({"step": step}))
    _publish(tmp, final)
    if keep:
        prune_checkpoints(output_dir, keep)
    return final


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Keep the newest `keep` trainer checkpoints (the orchestrator's small files stay)."""
    root = output_dir / "checkpoints"
    steps = sorted(int(p.name.split("_")[1]) for p in root.glob("step_*") if (p / "trainer").is_dir())
    for step in steps[:-keep]:
        shutil.rmtree(root / f"step_{step}" / "trainer")


def save_rank_rng(output_dir: Path, step: int, rank: int) -> None:
    torch.save(rng_state(), output_dir / "checkpoints" / f"step_{step}" / "trainer" / f"rng_rank{rank}.pt")


def load_checkpoint(model: Any, optimizer: Any, scheduler: Any, output_dir: Path, step: int, rank: int = 0) -> None:
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    folder = output_dir / "checkpoints" / f"step_{step}" / "trainer"
    weights = load_file(str(folder / "adapter_model.safetensors"), device=str(next(model.parameters()).device))
    result = set_peft_model_state_dict(model, weights)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise RuntimeError(f"checkpoint {folder} does not match the model (unexpected keys such as {unexpected[0]})")
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=False))
    rank_rng = folder / f"rng_rank{rank}.pt"
    restore_rng(torch.load(rank_rng if rank and rank_rng.exists() else folder / "rng.pt", weights_only=False))
