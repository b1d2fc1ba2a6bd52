"""Which weights a training run uses: "local" is the embedded SmolLM2, "local-moe" the small MoE
upcycled from it, else a folder or a hub id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prime_cli.clients.command_flags import is_local_model
from prime_cli.serve.builtin_models import builtin_folder, served_name


@dataclass(frozen=True)
class TrainingWeights:
    path: str  # a folder, or a Hugging Face id the trainer and vLLM load by name
    served_name: str
    is_local_embedded: bool  # a model prime builds itself ("local", "local-moe")


def training_weights(name: str, status=lambda _: None) -> TrainingWeights:
    """The weights `[model] name` trains: materialises a built-in model on first use (a one-time conversion)."""
    if is_local_model(name):
        return TrainingWeights(str(builtin_folder(name, status)), served_name(name), True)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return TrainingWeights(str(folder.resolve()), folder.resolve().name, False)
    return TrainingWeights(name, name, False)
