"""The policy: the base model with a peft LoRA adapter on the configured modules."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from prime_cli.train.plugin_api import (
    LoraTargets,
    RLConfig,
    adapter_path,
    moe_shape,
    resolve_lora_targets,
)


def pick_device() -> torch.device:
    from .distributed import local_device

    return local_device()


def pick_dtype(config: RLConfig, device: torch.device) -> torch.dtype:
    """auto: bf16 on CUDA, fp32 on CPU (vLLM on CPU serves fp32 too, so logprobs match)."""
    if config.model.dtype == "float32":
        return torch.float32
    if config.model.dtype == "bfloat16":
        return torch.bfloat16
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def build_policy(config: RLConfig, model_path: str, device: torch.device, dtype: torch.dtype,
                 base: Any = None, initial_adapter: bool = True) -> Any:
    """A PeftModel whose LoRA B matrices are zero: at step 0 it computes exactly the base model; with
    `[model] adapter = PATH` (and `initial_adapter`: a resume loads its checkpoint instead), the weights of
    that adapter. `base`: the base model already built in `dtype` (benchmarks build random weights in
    memory), else read from model_path."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from .packed_attention import ATTENTION_IMPLEMENTATIONS, register
    from .routing import track_routing

    register()
    torch.manual_seed(config.seed)
    attention = ATTENTION_IMPLEMENTATIONS[pick_attention(config.trainer.model.attention, device, dtype)]
    if base is None:
        base = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, attn_implementation=attention)
    else:
        base.set_attn_implementation(attention)
    base.config.use_cache = False
    use_experts_implementation(base, config.trainer.model.experts_implementation)
    lora = config.trainer.model.lora
    targets = lora_targets(config, base)
    peft_config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, bias="none",
                             task_type="CAUSAL_LM", **targets.peft_kwargs())
    with warnings.catch_warnings():
        # peft checks rank_pattern/alpha_pattern keys against module names only; ours name fused expert
        # parameters, which it does apply (tests/.../test_trainer_moe.py checks the scaling)
        warnings.filterwarnings("ignore", message=".*pattern keys did not match any targeted module")
        model = get_peft_model(base, peft_config)
    track_routing(model, dtype)
    for param in trainable_parameters(model):  # the adapter and its optimizer state; the base stays in `dtype`
        param.data = param.data.to(OPTIMIZATION_DTYPES[config.trainer.model.optimization_dtype])
    if initial_adapter and config.model.adapter is not None:  # into the adapter's own dtype, before any wrapper
        from .warm_start import load_initial_adapter

        load_initial_adapter(model, adapter_path(config))
    if config.trainer.model.mixed_precision:
        use_mixed_precision(model, dtype)
    if config.trainer.model.ac is not None:
        checkpoint_layers(model, config.trainer.model.ac.freq)
    model = model.to(device)
    if compiles(config, device):
        compile_layers(model)
    return model


def lora_targets(config: RLConfig, base: Any) -> LoraTargets:
    """What the LoRA adapts on this model (prime_cli/train/lora_targets.py decides; this checks peft can)."""
    lora = config.trainer.model.lora
    targets = resolve_lora_targets(list(lora.target_modules), lora.rank, lora.alpha, base.config.to_dict())
    if targets.parameters and lora.dropout:
        raise ValueError(f"trainer.model.lora.dropout = {lora.dropout:g} cannot apply to a Mixture-of-Experts "
                         "model's fused expert weights (peft adapts them as parameters, with no place for "
                         "dropout); set dropout = 0")
    return targets


def describe_adapters(model: Any) -> str:
    """What the peft model adapts, counted from its modules: 'q_proj x30, ..., experts.gate_up_proj x30
    (4 experts, rank 16)'."""
    from peft.tuners.lora import LoraLayer

    counts: dict[str, int] = {}
    details: dict[str, str] = {}
    for name, module in model.named_modules():
        if not isinstance(module, LoraLayer) or not module.lora_A:
            continue
        parameter = getattr(module, "parameter_name", None)
        leaf = name.replace(".base_layer", "").rsplit(".", 1)[-1]
        key = f"{leaf}.{parameter}" if parameter and parameter != "weight" else leaf
        counts[key] = counts.get(key, 0) + 1
        experts = getattr(module, "num_experts", 1)
        rank = next(iter(module.r.values()))
        details[key] = f" ({experts} experts, rank {rank})" if experts > 1 else f" (rank {rank})"
    return ", ".join(f"{key} x{n}{details[key]}" for key, n in counts.items())


def pick_attention(choice: str, device: torch.device, dtype: torch.dtype) -> str:
    """trainer.model.attention -> "varlen" or "sdpa". varlen is flash attention: CUDA and bf16/fp16 only."""
    import importlib.util

    runs = (device.type == "cuda" and dtype in LOW_PRECISION
            and importlib.util.find_spec("torch.nn.attention.varlen") is not None)
    if choice == "auto":
        return "varlen" if runs else "sdpa"
    if choice == "varlen" and not runs:
        raise ValueError(f"trainer.model.attention = \"varlen\" is flash attention: it needs a CUDA GPU, a bf16 or "
                         f"fp16 model and torch 2.10+ (here: {device.type}, {str(dtype).removeprefix('torch.')}, "
                         f"torch {torch.__version__}); use \"sdpa\" or \"auto\"")
    return choice


def use_experts_implementation(base: Any, choice: str) -> str | None:
    """trainer.model.experts_implementation on a Mixture-of-Experts model; returns the one set (None: a dense
    model, or a transformers without the choice). grouped_mm computes what the eager loop over experts
    computes, peft's expert adapters included (tests/.../test_trainer_moe.py), with one grouped GEMM per
    projection instead of one small matmul per expert; where its kernel cannot run (old torch on CPU, GPUs
    before SM80) transformers falls back inside it."""
    if moe_shape(base.config.to_dict()) is None or not hasattr(base, "set_experts_implementation"):
        return None
    implementation = "grouped_mm" if choice == "auto" else choice
    base.set_experts_implementation(implementation)
    return implementation


def compiles(config: RLConfig, device: torch.device) -> bool:
    choice = config.trainer.model.compile
    return device.type == "cuda" if choice is None else choice


def compile_layers(model: Any, backend: str = "inductor") -> int:
    """torch.compile each decoder layer in place (as prime-rl does): the elementwise work between the
    matmuls (norms, RoPE, the gated MLP's activation, the adapters' adds) fuses into few kernels.
    Attention is excluded (packed_attention.py) and the row length is left to dynamo's automatic
    dynamic shapes: one recompilation when it first changes, none after. A model whose layers cannot
    be found keeps running uncompiled, with one line saying so, and a layer that fails to compile runs
    eagerly (dynamo's suppress_errors). Returns the layers compiled."""
    from .fsdp import decoder_layers

    try:
        layers = decoder_layers(model)
    except RuntimeError:
        print("trainer: no decoder layer class found; running uncompiled (trainer.model.compile)", flush=True)
        return 0
    import torch._dynamo

    torch._dynamo.config.suppress_errors = True  # a layer that fails to compile runs eagerly (with a warning)
    for layer in layers:
        for experts in adapted_fused_experts(layer):
            experts.forward = torch.compiler.disable(experts.forward)
        layer.compile(backend=backend)
    return len(layers)


def adapted_fused_experts(layer: Any) -> list[Any]:
    """The outermost peft wrapper of each adapted fused-expert weight in `layer`. Their forward stays eager
    (dynamo breaks the layer's graph around it): peft adds a parametrization to the experts module on each
    call, a new class each time, so dynamo recompiles every layer on each step until its recompile limit;
    a layer then ran one graph in forward and another in activation checkpointing's recomputation, which
    torch refuses (a 48-layer Qwen3-30B-A3B died on its first backward). The grouped GEMMs inside are
    kernels either way; only the small elementwise work around them is left unfused."""
    wrappers: list[Any] = []
    for name, module in layer.named_modules():
        if getattr(module, "parameter_name", None) is None or not hasattr(module, "lora_A"):
            continue
        if not any(name.startswith(f"{outer}.") for outer, _ in wrappers):
            wrappers.append((name, module))
    return [module for _, module in wrappers]


OPTIMIZATION_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
LOW_PRECISION = (torch.bfloat16, torch.float16)


def use_mixed_precision(model: Any, dtype: torch.dtype) -> bool:
    """With a low-precision base and fp32 adapters, let the adapters compute in the base's dtype: peft
    stops casting each adapted projection's input to fp32 (and its output back), and the forward runs
    under autocast (compute_precision), which casts the small adapter weights instead, differentiably, so
    their gradients and AdamW's state stay fp32. Returns whether it applies."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    adapters = {p.dtype for p in trainable_parameters(model)}
    if dtype not in LOW_PRECISION or adapters != {torch.float32}:
        return False
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    for module in causal_lm.get_decoder().modules():  # the decoder runs under autocast; an adapted head does not
        if isinstance(module, BaseTunerLayer):
            module.cast_input_dtype_enabled = False
    model.prime_compute_dtype = dtype
    return True


def compute_precision(model: Any, device_type: str) -> Any:
    """The context a forward of `model` runs in: autocast to its compute dtype under mixed precision.
    (Activation checkpointing's recomputation restores the autocast state it saw.)"""
    import contextlib

    dtype = getattr(model, "prime_compute_dtype", None)
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def checkpoint_layers(model: Any, freq: int) -> list[int]:
    """Activation checkpointing on every `freq`-th decoder layer (0, freq, 2*freq, ...): their activations
    are recomputed in backward instead of kept. Returns the indexes of the wrapped layers."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl,
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )

    from .fsdp import decoder_layers

    layers = decoder_layers(model)
    chosen = {id(layer) for index, layer in enumerate(layers) if index % freq == 0}
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: id(m) in chosen)
    return [index for index, layer in enumerate(layers) if id(layer) in chosen]


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]
