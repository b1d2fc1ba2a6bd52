"""The LoRA FLOP count used for MFU, on known configurations."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from prime_lora.trainer.flops import lora_flops_per_token, lora_parameter_count, matmul_parameters

QWEN3_0_6B = SimpleNamespace(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                             num_key_value_heads=8, head_dim=128, vocab_size=151936)


def test_qwen3_0_6b_lora_r16_at_16k_tokens():
    # per layer: q 1024x2048, k and v 1024x1024 each, o 2048x1024, MLP 3 x 1024x3072
    per_layer = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 3 * 1024 * 3072
    head = 151936 * 1024
    assert matmul_parameters(QWEN3_0_6B) == 28 * per_layer + head == 595_984_384
    # rank 16 on the seven projections: r x (in + out) each
    lora = 28 * 16 * ((1024 + 2048) * 2 + (1024 + 1024) * 2 + (1024 + 3072) * 3)
    assert lora == 10_092_544
    attention = 12 * 28 * 16 * 128 * 16384
    expected = 4 * 595_984_384 + 6 * lora + attention
    assert lora_flops_per_token(QWEN3_0_6B, lora, 16384) == expected == 13_718_781_952


def test_prime_rl_published_mfu_is_reproduced_with_its_head_size_convention():
    # prime-rl: Qwen3-0.6B, LoRA r16, seq_len 16k, one H100 (989 TFLOPs bf16): 13.3k tokens/s at 10.9% MFU;
    # its counter takes hidden_size / heads = 64 as the attention head size
    flops = lora_flops_per_token(QWEN3_0_6B, 10_092_544, 16384, attention_head_dim=1024 // 16)
    assert 13.3e3 * flops / 989e12 == pytest.approx(0.109, abs=0.0006)
    # the real head size (128) counts more attention work for the same throughput
    assert lora_flops_per_token(QWEN3_0_6B, 10_092_544, 16384) > 1.6 * flops


def test_frozen_weights_count_4x_and_trained_ones_6x():
    base = lora_flops_per_token(QWEN3_0_6B, 0, 1)
    assert lora_flops_per_token(QWEN3_0_6B, 1000, 1) - base == 6000
    assert lora_flops_per_token(QWEN3_0_6B, 0, 1, full_trainable_params=1000) - base == 2000  # on top of its 4x


def test_lora_parameters_are_counted_from_the_peft_model(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from lora_tiny import tiny_config, tiny_model

    from prime_lora.trainer.model import build_policy

    model = build_policy(tiny_config(tmp_path), tiny_model(tmp_path / "tiny"), torch.device("cpu"), torch.float32)
    # tiny Llama: hidden 32, 4 heads of 8, 2 KV heads, MLP 64, 2 layers; rank 4 on the seven projections
    per_layer = 4 * ((32 + 32) * 2 + (32 + 16) * 2 + (32 + 64) * 3)
    assert lora_parameter_count(model) == (2 * per_layer, 0)


def test_trainer_bench_trains_on_every_token():
    torch = pytest.importorskip("torch")
    from benchmarks.trainer_bench import synthetic_sample

    sample = synthetic_sample(64, 1000, torch.Generator().manual_seed(0))
    assert len(sample["input_ids"]) == len(sample["loss_mask"]) == len(sample["inference_logprobs"]) == 64
    assert sum(sample["loss_mask"][1:]) == 63  # every predicted token is a loss token
