"""The torch fused-MoE LoRA path computes, token by token, what an MoE layer with LoRA experts computes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from prime_cli.serve import cpu_moe_lora_ops as ops  # noqa: E402


def _reference(x, w13, w2, topk_weights, topk_ids, token_lora, a13, b13, a2, b2, weight_on_input=False):
    """One token, one routed expert at a time: dense weights with the token's adapter added in."""
    out = torch.zeros(x.shape[0], w2.shape[1], dtype=torch.float64)
    for t in range(x.shape[0]):
        slot = int(token_lora[t])
        for k in range(topk_ids.shape[1]):
            e = int(topk_ids[t, k])
            gate_up, down = w13[e].double(), w2[e].double()
            if slot >= 0:
                deltas = [b[slot, e].double() @ a[slot, e].double() for a, b in zip(a13, b13, strict=True)]
                gate_up = gate_up + torch.cat(deltas)
                down = down + b2[slot, e].double() @ a2[slot, e].double()
            h = gate_up @ x[t].double()
            inter = torch.nn.functional.silu(h[: h.shape[0] // 2]) * h[h.shape[0] // 2:]
            y = down @ inter
            out[t] += y if weight_on_input else topk_weights[t, k].double() * y
    return out


def _case(tokens, experts, top_k, slots, seed, rank=4, hidden=24, inter=20, lora_per_token=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g)
    w13 = torch.randn(experts, 2 * inter, hidden, generator=g) / hidden ** 0.5
    w2 = torch.randn(experts, hidden, inter, generator=g) / inter ** 0.5
    logits = torch.randn(tokens, experts, generator=g)
    topk_weights, topk_ids = logits.softmax(-1).topk(top_k, dim=-1)
    a13 = tuple(torch.randn(slots, experts, rank, hidden, generator=g) / hidden ** 0.5 for _ in range(2))
    b13 = tuple(torch.randn(slots, experts, inter, rank, generator=g) / rank ** 0.5 for _ in range(2))
    a2 = torch.randn(slots, experts, rank, inter, generator=g) / inter ** 0.5
    b2 = torch.randn(slots, experts, hidden, rank, generator=g) / rank ** 0.5
    if lora_per_token is None:
        lora_per_token = torch.randint(-1, slots, (tokens,), generator=g)
    return x, w13, w2, topk_weights, topk_ids.int(), torch.as_tensor(lora_per_token), a13, b13, a2, b2


@pytest.mark.parametrize(("tokens", "experts", "top_k", "slots", "seed"),
                         [(17, 6, 2, 3, 0), (9, 4, 3, 2, 1), (1, 8, 2, 1, 2), (32, 3, 1, 4, 3)])
def test_matches_per_token_reference(tokens, experts, top_k, slots, seed):
    case = _case(tokens, experts, top_k, slots, seed)
    got = ops.fused_moe_lora(*case[:5], case[5], case[6], case[7], case[8], case[9])
    assert torch.allclose(got.double(), _reference(*case), atol=1e-4)


def test_tokens_without_adapter_get_the_base_layer_and_adapters_differ():
    case = list(_case(12, 5, 2, 3, seed=4, lora_per_token=[-1] * 4 + [0] * 4 + [2] * 4))
    got = ops.fused_moe_lora(*case[:5], case[5], case[6], case[7], case[8], case[9])
    no_lora = (tuple(torch.zeros_like(a) for a in case[6]), tuple(torch.zeros_like(b) for b in case[7]),
               torch.zeros_like(case[8]), torch.zeros_like(case[9]))
    base = ops.fused_moe_lora(*case[:5], case[5], *no_lora)
    assert torch.allclose(got[:4], base[:4], atol=1e-6)
    assert ((got[4:] - base[4:]).norm(dim=1) > 1e-2).all()
    assert torch.allclose(got.double(), _reference(*case), atol=1e-4)


def test_router_weight_on_input_skips_the_output_weighting():
    case = _case(7, 4, 1, 2, seed=5)
    got = ops.fused_moe_lora(*case[:5], case[5], case[6], case[7], case[8], case[9], router_weight_on_input=True)
    assert torch.allclose(got.double(), _reference(*case, weight_on_input=True), atol=1e-4)


def test_experts_of_another_rank_are_skipped():
    x, w13, w2, weights, ids, lora, a13, b13, a2, b2 = _case(10, 4, 2, 2, seed=6)
    expert_map = torch.tensor([0, 1, -1, -1])  # this rank owns experts 0 and 1
    got = ops.fused_moe_lora(x, w13[:2], w2[:2], weights, ids, lora, tuple(a[:, :2] for a in a13),
                             tuple(b[:, :2] for b in b13), a2[:, :2], b2[:, :2], expert_map=expert_map)
    local = torch.where(ids < 2, weights, torch.zeros_like(weights))
    expected = _reference(x, w13, w2, local, ids, lora, a13, b13, a2, b2)
    assert torch.allclose(got.double(), expected, atol=1e-4)


def test_install_makes_cpu_lora_moe_choose_the_torch_experts():
    pytest.importorskip("vllm.model_executor.layers.fused_moe.oracle.unquantized")
    import vllm.model_executor.layers.fused_moe.oracle.unquantized as oracle
    import vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method as method

    saved = oracle.select_unquantized_moe_backend, method.select_unquantized_moe_backend
    try:
        assert ops.install()
        config = type("MoEConfig", (), {"is_lora_enabled": True})()
        backend, experts_cls = method.select_unquantized_moe_backend(config)
        assert backend == oracle.UnquantizedMoeBackend.CPU
        assert experts_cls.supports_lora() and experts_cls.__name__ == "TorchLoRAExperts"
    finally:
        oracle.select_unquantized_moe_backend, method.select_unquantized_moe_backend = saved
