"""Which weights a training run uses: "local" is the embedded SmolLM2, else a folder or a hub id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prime_cli.serve.embedded import EMBEDDED_NAME, ensure_embedded_model

LOCAL = "local"


@dataclass(frozen=True)
class ResolvedModel:
    path: str  # a folder, or a Hugging Face id the trainer and vLLM load by name
    served_name: str
    is_local_embedded: bool


def resolve_model(name: str, status=lambda _: None) -> ResolvedModel:
    """Materialises the embedded model on first use (a one-time conversion)."""
    if name == LOCAL:
        return ResolvedModel(str(ensure_embedded_model(status)), EMBEDDED_NAME, True)
    folder = Path(name).expanduser()
    if folder.is_dir():
        return ResolvedModel(str(folder.resolve()), folder.resolve().name, False)
    return ResolvedModel(name, name, False)
