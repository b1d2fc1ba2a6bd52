"""The policy: the base model with a peft LoRA adapter on the configured modules."""

from __future__ import annotations

from typing import Any

import torch

from prime_cli.train.plugin_api import RLConfig


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


def build_policy(config: RLConfig, model_path: str, device: torch.device, dtype: torch.dtype) -> Any:
    """A PeftModel whose LoRA B matrices are zero: at step 0 it computes exactly the base model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(config.seed)
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    base.config.use_cache = False
    lora = config.trainer.model.lora
    peft_config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=list(lora.target_modules), bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, peft_config)
    for param in trainable_parameters(model):  # the adapter and its optimizer state; the base stays in `dtype`
        param.data = param.data.to(OPTIMIZATION_DTYPES[config.trainer.model.optimization_dtype])
    if config.trainer.model.ac is not None:
        checkpoint_layers(model, config.trainer.model.ac.freq)
    return model.to(device)


OPTIMIZATION_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


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
