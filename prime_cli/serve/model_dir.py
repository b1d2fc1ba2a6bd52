"""Is a folder a Hugging Face model vLLM can serve? Checked before a server is started."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ServeError

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


def check_model_dir(path: Path) -> None:
    """Raise ServeError naming what is missing when `path` is not a servable model folder."""
    if not path.exists():
        raise ServeError(f"model folder {path} does not exist; pass a Hugging Face model folder "
                         "(config.json, weights, tokenizer) or omit MODEL for the embedded SmolLM2")
    if not path.is_dir():
        raise ServeError(f"{path} is a file, not a model folder; pass the folder that holds config.json")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ServeError(f"{path} is not a model folder: it has no config.json "
                         "(save one with transformers' save_pretrained)")
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ServeError(f"{config_path} is not valid JSON ({exc}); re-save the model") from None
    if not isinstance(config, dict) or not (config.get("architectures") or config.get("model_type")):
        raise ServeError(f"{config_path} names no model architecture (no 'architectures' or 'model_type')")
    if not any(next(path.glob(pattern), None) for pattern in WEIGHT_PATTERNS):
        raise ServeError(f"{path} is not a model folder: no weights (*.safetensors or *.bin) in it")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ServeError(f"{path} has no tokenizer (tokenizer.json or tokenizer_config.json); "
                         "save the tokenizer into the same folder")
