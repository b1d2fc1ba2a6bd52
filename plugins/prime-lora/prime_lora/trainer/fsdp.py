"""FSDP2 for the trainer: the base model's weights are sharded across the trainer ranks.

Each decoder layer (the classes a transformers model lists in `_no_split_modules`) becomes one FSDP
unit, and the whole model the root unit, on a one-dimensional mesh over all ranks. Only the LoRA
parameters train; FSDP2 keeps per-parameter shards, so frozen and trainable weights share a unit.
FSDP averages gradients over the ranks; the loss is normalised by the batch's total loss tokens, so
the full batch's gradient is their sum: each rank scales its loss by the world size (step.py). A
divide factor of 1 would say the same, but gloo has no pre-multiplied sum.

State that leaves the trainer (the adapter, checkpoints) is gathered into full tensors by parameter
name (the optimizer's with torch.distributed.checkpoint's state-dict API), so files are the same
whether the run was sharded, replicated or one process, and a run resumes on any number of ranks.
"""

from __future__ import annotations

from typing import Any

import torch


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The repeated blocks of a transformers model (peft-wrapped or not)."""
    names: set[str] = set()
    for module in model.modules():
        names.update(getattr(module, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise RuntimeError(f"cannot shard {type(model).__name__}: the model lists no decoder layer class "
                           "(_no_split_modules); set trainer.model.fsdp = false to use full replicas")
    return layers


def shard_options(model_config: Any, compute_dtype: torch.dtype) -> dict[str, Any]:
    """fully_shard's mixed precision and offload from [trainer.model]: the weights are gathered and used in
    the compute dtype (model.dtype), gradients are reduced in reduce_dtype, and with fsdp_cpu_offload the
    shards live on the CPU between uses."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy

    reduce = {"float32": torch.float32, "bfloat16": torch.bfloat16}[model_config.reduce_dtype]
    return {"mp_policy": MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=reduce),
            "offload_policy": CPUOffloadPolicy() if model_config.fsdp_cpu_offload else OffloadPolicy()}


def shard_model(model: Any, world: int, device: torch.device, reshard_after_forward: bool,
                options: dict[str, Any] | None = None) -> Any:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world,))
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward, **(options or {}))
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward, **(options or {}))
    return model


def _options(**extra: Any) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True, **extra)


CHECKPOINT_WRAPPER_PREFIX = "_checkpoint_wrapped_module."


def plain_name(name: str) -> str:
    """A parameter's name without activation checkpointing's wrapper (the name in state dicts and files)."""
    return name.replace(CHECKPOINT_WRAPPER_PREFIX, "")


def full_trainable_state(model: Any) -> dict[str, torch.Tensor]:
    """The LoRA weights as full CPU tensors, by parameter name (a collective when sharded: every rank
    calls it). Gathered by hand: the state-dict API would also gather a tied LM head, frozen or not."""
    from torch.distributed.tensor import DTensor

    state = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            full = param.full_tensor() if isinstance(param, DTensor) else param
            state[plain_name(name)] = full.detach().to("cpu", copy=True)
    return state


def full_optimizer_state(model: Any, optimizer: Any) -> dict[str, Any]:
    """The optimizer state keyed by parameter name, full tensors (a collective)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=_options())


def load_full_state(model: Any, optimizer: Any, weights: dict[str, torch.Tensor], optim_state: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import (
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    set_model_state_dict(model, weights, options=_options(strict=False))
    set_optimizer_state_dict(model, optimizer, optim_state, options=_options())
