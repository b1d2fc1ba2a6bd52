"""Is a folder a Hugging Face model vLLM can serve? Checked before a server is started."""

from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class AdapterInfo:
    path: Path
    rank: int
    base_model: str | None  # base_model_name_or_path as peft saved it


VLLM_ADAPTER_SUBDIR = "vllm"


def read_adapter(path: Path) -> AdapterInfo:
    """A PEFT adapter folder's rank and base model; raises ServeError when it is not one."""
    config_path = path / "adapter_config.json"
    if not config_path.is_file():
        raise ServeError(f"{path} is not a PEFT adapter folder (no adapter_config.json); "
                         "pass a weights/step_N folder written by `prime train`")
    try:
        config = json.loads(config_path.read_text())
        # an MoE adapter's fused gate_up experts have their own rank (rank_pattern): vLLM must hold the largest
        rank = max([int(config.get("r", 0)), *(int(r) for r in (config.get("rank_pattern") or {}).values())])
    except (OSError, ValueError, AttributeError) as exc:
        raise ServeError(f"{config_path} is not a valid adapter config ({exc})") from None
    if not any(next(path.glob(pattern), None) for pattern in ("adapter_model.*",)):
        raise ServeError(f"{path} has no adapter weights (adapter_model.safetensors)")
    if config.get("target_parameters") and vllm_adapter_path(path) == path:
        raise ServeError(f"{path} adapts a Mixture-of-Experts model's fused experts (peft's layout), which vLLM "
                         f"does not load (it would drop every expert adapter); `prime train` writes vLLM's per-expert "
                         f"copy beside it in {VLLM_ADAPTER_SUBDIR}/: pass a weights/step_N folder it wrote")
    base = config.get("base_model_name_or_path")
    return AdapterInfo(path, rank, base if isinstance(base, str) and base else None)


def vllm_adapter_path(path: Path) -> Path:
    """The folder to hand vLLM for the adapter in `path`: the trainer writes an MoE adapter's per-expert
    layout, which vLLM loads, to `path/vllm/` beside peft's fused one (prime_lora/moe_adapter.py)."""
    sub = Path(path) / VLLM_ADAPTER_SUBDIR
    return sub if (sub / "adapter_model.safetensors").is_file() else Path(path)


def parse_lora_option(value: str) -> tuple[str, Path, int]:
    """`NAME=PATH` of a PEFT adapter folder -> (name, absolute path, LoRA rank)."""
    name, sep, raw_path = value.partition("=")
    if not sep or not name.strip() or not raw_path.strip():
        raise ServeError(f"--lora {value!r}: expected NAME=PATH, e.g. --lora trained=outputs/weights/step_20")
    path = Path(raw_path.strip()).expanduser().resolve()
    try:
        adapter = read_adapter(path)
    except ServeError as exc:
        raise ServeError(f"--lora {name.strip()}: {exc}") from None
    return name.strip(), path, adapter.rank
