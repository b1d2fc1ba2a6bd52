"""Which weights a training run uses: "local" is the embedded SmolLM2, else a folder or a hub id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prime_cli.clients.command_flags import LOCAL_MODEL
from prime_cli.serve.embedded import EMBEDDED_NAME, ensure_embedded_model


@dataclass(frozen=True)
class TrainingWeights:
    path: str  # a folder, or a Hugging Face id the trainer and vLLM load by name
    served_name: str
    is_local_embedded: bool


def training_weights(name: str, status=lambda _: None) -> TrainingWeights:
    """The weights `[model] name` trains: materialises the embedded model on first use (a one-time conversion)."""
    if name == LOCAL_MODEL:
        return TrainingWeights(str(ensure_embedded_model(status)), EMBEDDED_NAME, True)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return TrainingWeights(str(folder.resolve()), folder.resolve().name, False)
    return TrainingWeights(name, name, False)
