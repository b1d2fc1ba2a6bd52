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
    if config.trainer.model.ac is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model.to(device)


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]
