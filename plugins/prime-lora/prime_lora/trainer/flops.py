"""Training FLOPs per token of a LoRA-adapted decoder, counted the way prime-rl counts them for MFU.

Per token, with P the parameters of every matmul a token goes through (q, k, v, o, the three MLP
projections of each layer, and the LM head):
- a frozen matmul costs 2P forward and 2P backward for the gradient of its input (no weight gradient): 4P;
- a LoRA adapter's A and B train: 2 forward + 2 input-gradient + 2 weight-gradient = 6 x their parameters;
- a fully trained non-LoRA weight (modules_to_save) adds its weight gradient: 2 x its parameters;
- attention scores and values: 2 matmuls forward, 4 backward, 2 FLOPs per multiply-add
  = 12 x layers x heads x head_dim x seq_len (causal sparsity not discounted, recomputation not counted).
Activation-checkpointing recomputation is not counted either: MFU measures useful work.
"""

from __future__ import annotations

from typing import Any


def matmul_parameters(config: Any) -> int:
    """Weights of the matmuls one token goes through (dense decoder: GQA attention, gated MLP, LM head)."""
    hidden, layers, heads = config.hidden_size, config.num_hidden_layers, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q and o; k and v
    mlp = 3 * hidden * config.intermediate_size
    return layers * (attention + mlp) + config.vocab_size * hidden


def lora_flops_per_token(config: Any, lora_params: int, seq_len: int, full_trainable_params: int = 0,
                         attention_head_dim: int | None = None) -> float:
    """`config`: the model's transformers config. `attention_head_dim` overrides the head size used for
    attention FLOPs: prime-rl's counter takes hidden_size / heads, which on Qwen3 (head_dim 128 =
    2 x hidden / heads for the 0.6B) is half the real size."""
    head_dim = attention_head_dim or getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    attention = 12 * config.num_hidden_layers * config.num_attention_heads * head_dim * seq_len
    return 4 * matmul_parameters(config) + 6 * lora_params + 2 * full_trainable_params + attention


def lora_parameter_count(model: Any) -> tuple[int, int]:
    """(LoRA adapter parameters, other trained parameters) of a peft model."""
    lora = other = 0
    for name, param in model.named_parameters():
        if param.requires_grad:
            if "lora_" in name:
                lora += param.numel()
            else:
                other += param.numel()
    return lora, other
