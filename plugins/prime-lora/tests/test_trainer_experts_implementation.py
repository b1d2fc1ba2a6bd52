"""trainer.model.experts_implementation: transformers' grouped-GEMM experts (one grouped matmul per fused
expert projection) compute what its eager loop over the experts computes, with peft's expert adapters on
the fused weights, forward and LoRA gradients; "auto" picks grouped_mm."""

from __future__ import annotations

import pytest
import torch
from lora_tiny import VOCAB, tiny_config, tiny_model, tiny_moe_model

from prime_lora.trainer.model import build_policy, use_experts_implementation


@pytest.fixture(scope="module", params=["mixtral", "qwen3_moe"])
def moe_path(request, tmp_path_factory):
    return tiny_moe_model(tmp_path_factory.mktemp(request.param), request.param)


def policy(path, tmp_path, implementation="auto"):
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0,
                                      "trainer.model.experts_implementation": implementation})
    return build_policy(config, path, torch.device("cpu"), torch.float32)


def forward_and_grads(model) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: give every adapter a real delta
            param.data = torch.randn(param.shape, generator=generator) * 0.1
    ids = torch.randint(1, VOCAB, (2, 40), generator=generator)
    logits = model(input_ids=ids).logits
    logits.logsumexp(-1).sum().backward()
    return logits.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}


def test_grouped_mm_experts_equal_the_eager_loop_with_expert_adapters(moe_path, tmp_path):
    eager, grouped = policy(moe_path, tmp_path, "eager"), policy(moe_path, tmp_path, "grouped_mm")
    assert eager.get_base_model().config._experts_implementation == "eager"
    assert grouped.get_base_model().config._experts_implementation == "grouped_mm"
    logits, grads = forward_and_grads(eager)
    grouped_logits, grouped_grads = forward_and_grads(grouped)
    torch.testing.assert_close(grouped_logits, logits, atol=1e-5, rtol=1e-5)
    experts = [n for n in grads if ".mlp.experts." in n]
    assert len(experts) == 8  # gate_up and down, A and B, two layers
    assert all(float(grads[n].abs().max()) > 0 for n in experts)
    for name, grad in grads.items():
        torch.testing.assert_close(grouped_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_auto_picks_grouped_mm_and_a_dense_model_is_left_alone(moe_path, tmp_path):
    assert policy(moe_path, tmp_path).get_base_model().config._experts_implementation == "grouped_mm"
    from transformers import AutoModelForCausalLM

    dense = AutoModelForCausalLM.from_pretrained(tiny_model(tmp_path / "dense"))
    assert use_experts_implementation(dense, "eager") is None
