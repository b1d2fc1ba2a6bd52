"""Child process: sparse-upcycle a dense Llama folder into a Mixtral folder that computes the same output.

Run as `python -m prime_cli.serve.upcycle DENSE_DIR OUT_DIR EXPERTS TOP_K SEED ROUTER_STD`. Kept out
of the parent so that torch and transformers are never imported by the prime process itself.

Every expert is a copy of the dense MLP and Mixtral renormalises its top-k routing weights to sum to
one, so any router leaves the output equal to the dense model's. The router still gets small random
weights: a zero router ties every expert and always picks the same ones, whose adapters would then
be the only ones ever trained.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

COPIED_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
SHARED_CONFIG_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                      "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "rms_norm_eps",
                      "rope_parameters", "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id",
                      "initializer_range", "attention_dropout")


def mixtral_config(dense: dict, experts: int, top_k: int):
    from transformers import MixtralConfig  # lazy: optional dependency

    if dense.get("model_type") != "llama" or dense.get("attention_bias") or dense.get("mlp_bias"):
        raise ValueError("upcycling needs a Llama model without biases (Mixtral's attention and MLP have none)")
    return MixtralConfig(**{k: dense[k] for k in SHARED_CONFIG_KEYS if k in dense},
                         num_local_experts=experts, num_experts_per_tok=top_k, sliding_window=None,
                         router_jitter_noise=0.0, output_router_logits=False, dtype="float32")


def upcycled_state(dense_state: dict, layers: int, experts: int, hidden: int, seed: int, router_std: float) -> dict:
    """Mixtral parameters (transformers' in-memory names) from Llama ones: the fused `gate_up_proj` of
    each expert is the gate rows then the up rows of the dense MLP."""
    import torch  # lazy: optional dependency

    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, tensor in dense_state.items():
        if ".mlp." not in name:
            state[name] = tensor
    for i in range(layers):
        mlp = f"model.layers.{i}.mlp"
        gate_up = torch.cat([dense_state[f"{mlp}.gate_proj.weight"], dense_state[f"{mlp}.up_proj.weight"]], dim=0)
        state[f"{mlp}.experts.gate_up_proj"] = gate_up.unsqueeze(0).repeat(experts, 1, 1)
        state[f"{mlp}.experts.down_proj"] = dense_state[f"{mlp}.down_proj.weight"].unsqueeze(0).repeat(experts, 1, 1)
        state[f"{mlp}.gate.weight"] = torch.randn(experts, hidden, generator=generator) * router_std
    return state


def upcycle(dense_dir: Path, out_dir: Path, experts: int, top_k: int, seed: int, router_std: float) -> None:
    import torch  # lazy: optional dependency
    from safetensors.torch import load_file  # lazy: optional dependency
    from transformers import MixtralForCausalLM  # lazy: optional dependency

    dense = json.loads((dense_dir / "config.json").read_text())
    config = mixtral_config(dense, experts, top_k)
    dense_state = load_file(str(dense_dir / "model.safetensors"))
    state = upcycled_state(dense_state, config.num_hidden_layers, experts, config.hidden_size, seed, router_std)
    with torch.device("meta"):
        model = MixtralForCausalLM(config)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    missing = [name for name in missing if not (config.tie_word_embeddings and name == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"weights do not fit Mixtral: missing {missing[:3]}, unexpected {unexpected[:3]}")
    model.tie_weights()
    # save_pretrained writes Mixtral's checkpoint names (block_sparse_moe.experts.N.w1/w2/w3), which
    # both transformers and vLLM load
    model.save_pretrained(out_dir)
    for name in COPIED_FILES:  # the dense generation_config.json replaces the one save_pretrained made
        if (dense_dir / name).is_file():
            shutil.copyfile(dense_dir / name, out_dir / name)


if __name__ == "__main__":
    upcycle(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
            float(sys.argv[6]))
