"""A model's config.json without loading the model (no torch): from a folder, from the local Hugging Face
cache, or, for the hub models the guides name, from the public config's architecture keys kept here, so
that a `--dry-run` on a laptop plans a Qwen3-30B-A3B run truthfully."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_cli.clients.command_flags import LOCAL_MODEL, LOCAL_MOE_MODEL

QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
    "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
}
# the architecture keys of public configs (facts copied from each model's config.json on the hub)
PUBLIC_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen/qwen3-30b-a3b": {**QWEN3_30B_A3B, "max_position_embeddings": 40960, "rope_theta": 1000000.0},
    "qwen/qwen3-30b-a3b-instruct-2507": {**QWEN3_30B_A3B, "max_position_embeddings": 262144,
                                         "rope_theta": 10000000.0},
    "qwen/qwen3-30b-a3b-thinking-2507": {**QWEN3_30B_A3B, "max_position_embeddings": 262144,
                                         "rope_theta": 10000000.0},
}
EMBEDDED_IS_DENSE = {"model_type": "llama", "num_hidden_layers": 30}


def model_config(name: str) -> dict[str, Any] | None:
    """config.json of `[model] name` as far as this machine can tell without downloading (None: unknown)."""
    if name == LOCAL_MODEL:
        return EMBEDDED_IS_DENSE
    if name == LOCAL_MOE_MODEL:
        return local_moe_facts()
    folder = Path(name).expanduser()
    if folder.is_dir():
        return _read(folder / "config.json")
    cached = _hub_cache_file(name)
    if cached is not None:
        return _read(cached)
    return PUBLIC_CONFIGS.get(name.lower())


def model_folder(name: str) -> Path | None:
    """The folder holding a non-built-in model's weights here: the folder itself, or its snapshot in the
    local Hugging Face cache (None: neither)."""
    folder = Path(name).expanduser()
    if folder.is_dir():
        return folder.resolve()
    cached = _hub_cache_file(name)
    return cached.parent if cached is not None else None


def local_moe_facts() -> dict[str, Any]:
    """The upcycled model's shape from its recipe (a dry run does not build it)."""
    from prime_cli.serve.local_moe import NUM_EXPERTS, TOP_K  # lazy: start-up

    return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_hidden_layers": 30,
            "num_local_experts": NUM_EXPERTS, "num_experts_per_tok": TOP_K}


def _hub_cache_file(name: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: optional dependency
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(name, "config.json")
    except (ValueError, OSError):  # not a hub id, or an unreadable cache
        return None
    return Path(cached) if isinstance(cached, str) else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
