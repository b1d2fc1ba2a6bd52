"""Which weights a LoRA run adapts, decided from the model's config.json alone (no torch), so that the
`--dry-run` plan and the trainer say the same thing.

Dense models: `trainer.model.lora.target_modules` are the nn.Linear names peft matches by suffix.
Mixture-of-Experts models (transformers 5 keeps each layer's experts as two fused 3D parameters,
`mlp.experts.gate_up_proj` [experts, 2 x intermediate, hidden] and `mlp.experts.down_proj`): the expert
projection names users know (gate_proj, up_proj, down_proj; Mixtral's w1, w3, w2; or `experts` for all
three) become peft `target_parameters` on those fused weights, one LoRA slice per expert. gate and up are
one fused weight, so naming either adapts both, at rank 2r with alpha 2 x alpha: the same number of
weights as two rank-r adapters, and the configured scaling alpha/r (vLLM reads the same rank_pattern and
alpha_pattern). Shared experts are ordinary nn.Linear modules and match the usual names. The router
(`mlp.gate`) is adapted only when `router` is named (which `prime train` refuses for now: vLLM 0.32 serves no
router LoRA; preflight.py).

peft's own automatic mapping of gate_proj/up_proj/down_proj onto fused experts covers some architectures
(Qwen3-MoE) and silently none of others (Mixtral: the experts stayed frozen), so the mapping is ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
# the names a user may give for each fused expert weight
EXPERT_ALIASES = {"gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "w1": "gate_up_proj",
                  "w3": "gate_up_proj", "gate_up_proj": "gate_up_proj", "down_proj": "down_proj",
                  "w2": "down_proj"}
ALL_EXPERTS = "experts"
ROUTER = "router"
GATE_UP = "mlp.experts.gate_up_proj"
DOWN = "mlp.experts.down_proj"
ROUTER_WEIGHT = "mlp.gate.weight"
# the MoE architectures whose expert adapters reach vLLM correctly (prime_lora/moe_adapter.py knows their
# vLLM names and fused layout, [experts, 2 x intermediate, hidden] with gate rows then up rows; tested)
MOE_ARCHITECTURES = ("MixtralForCausalLM", "Qwen3MoeForCausalLM")
# keys that hold the routed expert count, by architecture family (Qwen2/3-MoE, Mixtral, DeepSeek-style)
EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
ACTIVE_KEYS = ("num_experts_per_tok", "moe_topk")
SHARED_KEYS = ("shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts")


@dataclass(frozen=True)
class MoeShape:
    experts: int
    active: int
    shared_experts: bool
    layers: int
    architecture: str | None = None


def moe_shape(config: dict[str, Any]) -> MoeShape | None:
    """The routed-expert layout of a config.json (a text config nested under `text_config` counts), or
    None for a dense model."""
    config = config.get("text_config") or config
    experts = next((config[k] for k in EXPERT_COUNT_KEYS if isinstance(config.get(k), int)), 0)
    if experts <= 1:
        return None
    active = next((config[k] for k in ACTIVE_KEYS if isinstance(config.get(k), int)), 1)
    shared = any(config.get(k) for k in SHARED_KEYS)
    architecture = next(iter(config.get("architectures") or []), None)
    return MoeShape(experts, active, shared, int(config.get("num_hidden_layers") or 0), architecture)


@dataclass(frozen=True)
class LoraTargets:
    modules: list[str]  # peft target_modules (nn.Linear suffixes)
    parameters: list[str] = field(default_factory=list)  # peft target_parameters (fused expert weights)
    rank_pattern: dict[str, int] = field(default_factory=dict)
    alpha_pattern: dict[str, float] = field(default_factory=dict)
    description: str = ""

    def peft_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"target_modules": list(self.modules) or None}
        if self.parameters:
            kwargs.update(target_parameters=list(self.parameters), rank_pattern=dict(self.rank_pattern),
                          alpha_pattern=dict(self.alpha_pattern))
        return kwargs

    def max_rank(self, rank: int) -> int:
        """The largest adapter rank: vLLM's --max-lora-rank must hold it."""
        return max([rank, *self.rank_pattern.values()])


def lora_targets_for(config: Any) -> LoraTargets:
    """The targets of an RLConfig's LoRA on the model it trains (its config.json as far as known here)."""
    from .model_facts import model_config  # lazy: start-up

    lora = config.trainer.model.lora
    return resolve_lora_targets(list(lora.target_modules), lora.rank, lora.alpha,
                                model_config(config.model.name))


def resolve_lora_targets(target_modules: list[str], rank: int, alpha: float,
                         config: dict[str, Any] | None) -> LoraTargets:
    """What peft is asked to adapt for `target_modules` on a model with this config.json (None: unknown)."""
    shape = moe_shape(config) if config else None
    names = list(dict.fromkeys(target_modules))
    if shape is None:
        where = "" if config else " (the model's config is not at hand: a dense model is assumed)"
        modules = [n for n in names if n not in (ALL_EXPERTS, ROUTER)] or names
        return LoraTargets(modules, description=f"on {', '.join(modules)}{where}")
    fused = {EXPERT_ALIASES[n] for n in names if n in EXPERT_ALIASES}
    if ALL_EXPERTS in names:
        fused = {"gate_up_proj", "down_proj"}
    parameters = ([GATE_UP] if "gate_up_proj" in fused else []) + ([DOWN] if "down_proj" in fused else [])
    if ROUTER in names:
        parameters.append(ROUTER_WEIGHT)
    # nn.Linear names stay targets too: shared experts and any dense MLP layers are ordinary modules
    modules = [n for n in names if n not in (ALL_EXPERTS, ROUTER, "w1", "w2", "w3", "gate_up_proj")]
    if {"gate_proj", "up_proj"} & set(modules):  # fused in the experts: both (peft refuses one alone)
        modules += [n for n in ("gate_proj", "up_proj") if n not in modules]
    rank_pattern = {GATE_UP: 2 * rank} if GATE_UP in parameters else {}
    alpha_pattern = {GATE_UP: 2 * alpha} if GATE_UP in parameters else {}
    return LoraTargets(modules, parameters, rank_pattern, alpha_pattern,
                       describe_moe(names, modules, parameters, shape, rank))


def describe_moe(names: list[str], modules: list[str], parameters: list[str], shape: MoeShape, rank: int) -> str:
    attention = [n for n in modules if n in ATTENTION]
    parts = [f"attention {', '.join(attention)}"] if attention else []
    experts = []
    if GATE_UP in parameters:
        experts.append(f"gate_up_proj (gate and up fused, rank {2 * rank})")
    if DOWN in parameters:
        experts.append(f"down_proj (rank {rank})")
    if experts:
        parts.append(f"each of the {shape.experts} experts' {' and '.join(experts)}")
    others = [n for n in modules if n not in ATTENTION]
    if others and shape.shared_experts:
        parts.append(f"the shared experts' {', '.join(others)}")
    elif others and not experts:
        parts.append(', '.join(others))
    router = "the router too" if ROUTER_WEIGHT in parameters else "router not adapted"
    return (f"on a Mixture-of-Experts model ({shape.experts} experts, {shape.active} active per token): "
            f"{'; '.join(parts)}; {router}")
