"""vLLM's layout of an MoE adapter, written beside the one peft saves.

peft saves the fused-expert LoRA of a transformers 5 MoE model (`target_parameters` on
`mlp.experts.gate_up_proj` / `down_proj`) as two flat pairs per layer:
  `...mlp.experts.base_layer.lora_A` [E*R, H], `lora_B` [2I, R*E]   (gate_up_proj, rank R = 2r)
  `...mlp.experts.lora_A`            [E*r, I], `lora_B` [H, r*E]    (down_proj)
lora_A rows are expert-major (row e*R + j), lora_B columns rank-major (column j*E + e), and the
gate_up output rows are gate rows then up rows.

vLLM 0.32 builds Mixtral and Qwen3-MoE with its 2D MoE LoRA wrapper, which takes one adapter per
expert and projection under the names of the vLLM model's expert weights. Given peft's fused pairs it
refuses the adapter (Qwen3-MoE: "contains fused 3D MoE weights", unless the server runs with
--enable-mixed-moe-lora-format and every load request says is_3d_lora_weight) or, for Mixtral, whose
vLLM module is `block_sparse_moe` and not transformers' `mlp`, ignores the expert adapters without a
word. `write_vllm_moe_adapter` writes the per-expert layout vLLM loads for both, with the same
scaling, into a subfolder; the attention adapters are copied unchanged.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

from prime_cli.train.plugin_api import MOE_ARCHITECTURES, VLLM_ADAPTER_SUBDIR, vllm_adapter_path

VLLM_SUBDIR = VLLM_ADAPTER_SUBDIR
WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"
GATE_UP, DOWN = "gate_up_proj", "down_proj"

# vLLM's module holding the experts and its per-expert (gate, up, down) weight names, by architecture
EXPERT_NAMES = {
    "MixtralForCausalLM": ("block_sparse_moe", "w1", "w3", "w2"),
    "Qwen3MoeForCausalLM": ("mlp", "gate_proj", "up_proj", "down_proj"),
}
assert set(EXPERT_NAMES) == set(MOE_ARCHITECTURES)  # what `prime train` accepts (lora_targets.py)

_FUSED = re.compile(r"^(?P<prefix>.*)\.mlp\.experts(?P<gate_up>\.base_layer)?\.lora_(?P<ab>[AB])\.weight$")


def vllm_adapter_dir(adapter_dir: Path) -> Path:
    """The folder to hand vLLM: the converted subfolder where one was written, else the adapter itself."""
    return vllm_adapter_path(Path(adapter_dir))


def _pattern_value(pattern: dict, name: str):
    # peft's (and vLLM's) rule: a key matches a suffix of the name that starts at a "." boundary
    for key, value in pattern.items():
        if re.match(rf"(.*\.)?({key})$", name):
            return value
    return None


def _scaling(config: dict, name: str) -> float:
    rank = _pattern_value(config.get("rank_pattern") or {}, name) or config["r"]
    alpha = _pattern_value(config.get("alpha_pattern") or {}, name) or config["lora_alpha"]
    return alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank


def _alpha_for(config: dict, rank: int, scaling: float) -> float:
    return scaling * math.sqrt(rank) if config.get("use_rslora") else scaling * rank


def architecture_of(config: dict) -> str | None:
    return (config.get("auto_mapping") or {}).get("base_model_class")


def adapts_gate_up(key: str, match: re.Match, parameters: dict[str, str] | None) -> bool:
    """Whether a saved fused-expert tensor adapts gate_up_proj (else down_proj). peft nests one wrapper per
    adapted parameter, so with both adapted `experts.base_layer` is the inner one; with one alone it is
    `experts`, whichever it is: `parameters` (module name -> parameter, from the live model) says."""
    if parameters:
        return parameters[key.rsplit(".lora_", 1)[0]] == GATE_UP
    return bool(match["gate_up"])


def split_fused_experts(tensors: dict, num_experts: int, names: tuple[str, str, str, str],
                        parameters: dict[str, str] | None = None) -> dict:
    """peft's fused expert pairs -> one (lora_A, lora_B) per expert and projection, vLLM's names."""
    block, gate, up, down = names
    out = {}
    for key, tensor in tensors.items():
        match = _FUSED.match(key)
        if match is None:
            out[key] = tensor
            continue
        if match["ab"] == "B":
            continue  # handled with its lora_A
        a = tensor
        b = tensors[key[: -len("lora_A.weight")] + "lora_B.weight"]
        rank = a.shape[0] // num_experts
        a_per_expert = a.reshape(num_experts, rank, a.shape[1])
        b_per_expert = b.reshape(b.shape[0], rank, num_experts).permute(2, 0, 1)  # (E, out, rank)
        base = f"{match['prefix']}.{block}.experts"
        for e in range(num_experts):
            a_e, b_e = a_per_expert[e].contiguous(), b_per_expert[e].contiguous()
            if adapts_gate_up(key, match, parameters):
                inter = b_e.shape[0] // 2
                for proj, rows in ((gate, b_e[:inter]), (up, b_e[inter:])):
                    out[f"{base}.{e}.{proj}.lora_A.weight"] = a_e.clone()
                    out[f"{base}.{e}.{proj}.lora_B.weight"] = rows.contiguous()
            else:
                out[f"{base}.{e}.{down}.lora_A.weight"] = a_e
                out[f"{base}.{e}.{down}.lora_B.weight"] = b_e
    return out


def write_vllm_moe_adapter(adapter_dir: Path, num_experts: int, architecture: str | None = None,
                           parameters: dict[str, str] | None = None) -> Path | None:
    """Write vLLM's per-expert layout of the peft adapter in `adapter_dir` to `adapter_dir/vllm`.

    None (nothing written) when the adapter has no fused expert LoRA. `architecture` defaults to the
    base model class peft recorded in adapter_config.json; one whose vLLM names are not known here is
    refused (ValueError). `parameters`: see adapts_gate_up.
    """
    from safetensors.torch import load_file, save_file

    adapter_dir = Path(adapter_dir)
    config = json.loads((adapter_dir / CONFIG).read_text())
    tensors = load_file(str(adapter_dir / WEIGHTS))
    if not any(_FUSED.match(key) for key in tensors):
        return None
    architecture = architecture or architecture_of(config) or ""
    if architecture not in EXPERT_NAMES:
        raise ValueError(f"no vLLM adapter layout is known for {architecture or 'this'} Mixture-of-Experts model "
                         f"(known: {', '.join(EXPERT_NAMES)})")
    names = EXPERT_NAMES[architecture]
    converted = split_fused_experts(tensors, num_experts, names, parameters)

    _, gate, up, down = names
    rank_pattern, alpha_pattern = {}, {}
    for fused, projections in ((GATE_UP, (gate, up)), (DOWN, (down,))):
        a = next((t for k, t in tensors.items() if (m := _FUSED.match(k)) and m["ab"] == "A"
                  and adapts_gate_up(k, m, parameters) == (fused == GATE_UP)), None)
        if a is None:
            continue
        rank = a.shape[0] // num_experts
        scaling = _scaling(config, f"mlp.experts.{fused}")
        for proj in projections:
            rank_pattern[rf"experts\.\d+\.{proj}"] = rank
            alpha_pattern[rf"experts\.\d+\.{proj}"] = _alpha_for(config, rank, scaling)
    new_config = dict(config)
    new_config["rank_pattern"] = {**rank_pattern, **(config.get("rank_pattern") or {})}
    new_config["alpha_pattern"] = {**alpha_pattern, **(config.get("alpha_pattern") or {})}
    new_config["target_parameters"] = None
    targets = config.get("target_modules") or []
    if isinstance(targets, list):  # a regex string (peft allows one) already names what it names
        new_config["target_modules"] = sorted({*targets, gate, up, down})

    target = adapter_dir / VLLM_SUBDIR
    staging = adapter_dir / (VLLM_SUBDIR + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    save_file(converted, str(staging / WEIGHTS))
    (staging / CONFIG).write_text(json.dumps(new_config, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target
