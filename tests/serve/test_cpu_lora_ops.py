"""The CPU LoRA fast path computes exactly what vLLM's gather-and-einsum ops compute."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
original = pytest.importorskip("vllm.lora.ops.torch_ops.lora_ops")

from prime_cli.serve import cpu_lora_ops as fast  # noqa: E402


def _case(indices, four_d=True, out_extra=0):
    g = torch.Generator().manual_seed(len(indices))
    tokens, rank, hidden, out = len(indices), 8, 24, 40
    a = torch.randn(3, 1, rank, hidden, generator=g) if four_d else torch.randn(3, rank, hidden, generator=g)
    b = torch.randn(3, 1, out, rank, generator=g) if four_d else torch.randn(3, out, rank, generator=g)
    x = torch.randn(tokens, hidden, generator=g)
    h = torch.randn(tokens, rank, generator=g)
    base = torch.randn(tokens, out + out_extra, generator=g)
    return a, b, x, h, base, torch.tensor(indices, dtype=torch.long)


@pytest.mark.parametrize("indices", [[0] * 7, [1, 1, 0, 2, 0], [-1, -1, 0], [2], []])
@pytest.mark.parametrize("four_d", [True, False])
def test_shrink_expand_and_slice_match_vllm(indices, four_d):
    a, b, x, h, base, idx = _case(indices, four_d)
    expected, got = torch.zeros(len(indices), 8), torch.zeros(len(indices), 8)
    original.bgmv_shrink(x, a, expected, idx, 0.5)
    fast.bgmv_shrink(x, a, got, idx, 0.5)
    assert torch.allclose(expected, got, atol=1e-5)
    for add in (True, False):
        expected, got = base.clone(), base.clone()
        original.bgmv_expand(h, b, expected, idx, add)
        fast.bgmv_expand(h, b, got, idx, add)
        assert torch.allclose(expected, got, atol=1e-5)
        wide_e, wide_g = torch.zeros(len(indices), 100), torch.zeros(len(indices), 100)
        original.bgmv_expand_slice(h, b, wide_e, idx, 30, 40, add)
        fast.bgmv_expand_slice(h, b, wide_g, idx, 30, 40, add)
        assert torch.allclose(wide_e, wide_g, atol=1e-5)


def test_install_replaces_the_ops_vllm_calls(monkeypatch):
    import vllm.lora.ops.torch_ops as package

    for name in fast.PATCHED:
        monkeypatch.setattr(original, name, getattr(original, name))
        monkeypatch.setattr(package, name, getattr(package, name))
    assert fast.install()
    assert original.bgmv_expand is fast.bgmv_expand and package.bgmv_shrink is fast.bgmv_shrink
    # sgmv (prefill) calls bgmv through the module's globals, so it takes the fast path as well
    a, b, x, h, base, idx = _case([0, 0, 0, 0])
    got = torch.zeros(4, 8)
    original.sgmv_shrink(x, a, got, None, torch.tensor([4]), torch.tensor([0]), 1, 4, 4, 1.0)
    assert torch.allclose(got, x @ a[0, 0].T, atol=1e-5)


def test_prompt_logprobs_of_requests_on_two_adapters_without_an_lm_head_lora():
    """vLLM's logits LoRA with prompt_logprobs: one index per request (here 3, two adapters) but one row per prompt
    token (10). vLLM's own op fails on it; adapters without lm_head weights add exactly 0, so the fast path answers
    zeros, and refuses (one clear error) when an adapter in the batch does have lm_head weights."""
    rank, hidden, vocab = 8, 24, 40
    a, b = torch.zeros(3, 1, rank, hidden), torch.zeros(3, 1, vocab, rank)
    x, idx = torch.randn(10, hidden), torch.tensor([0, 1, 0])
    with pytest.raises(RuntimeError, match="einsum"):
        original.bgmv_shrink(x, a, torch.zeros(10, rank), idx, 1.0)
    buffer = torch.full((10, rank), 7.0)
    fast.bgmv_shrink(x, a, buffer, idx, 1.0)
    logits = torch.randn(10, vocab)
    before = logits.clone()
    fast.bgmv_expand(buffer, b, logits, idx, True)
    assert torch.equal(buffer, torch.zeros(10, rank)) and torch.equal(logits, before)
    a[1] = 1.0
    with pytest.raises(RuntimeError, match="one adapter index per request"):
        fast.bgmv_shrink(x, a, buffer, idx, 1.0)
