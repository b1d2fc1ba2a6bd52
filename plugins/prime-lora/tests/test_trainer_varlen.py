"""`trainer.model.attention = "varlen"`: one flash-attention varlen call per layer for a packed row.

On CPU torch's kernel does not run, so a stand-in with its signature (attention per sample, causal,
from the cumulative lengths it is given) checks the plumbing: lengths to bounds, layouts, grouped KV
heads, the causal keyword of each torch version, and that the model really routes through it. The real
kernel is checked against `prime_sdpa` on CUDA (gpu-marked)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer import packed_attention  # noqa: E402
from prime_lora.trainer.logprobs import token_logprobs  # noqa: E402
from prime_lora.trainer.model import build_policy, trainable_parameters  # noqa: E402
from prime_lora.trainer.packed_attention import packed_sdpa_forward, packed_varlen_forward  # noqa: E402
from prime_lora.trainer.packing import packed_micro_batches  # noqa: E402

F = torch.nn.functional
CPU = torch.device("cpu")


def reference_varlen(calls: list[dict], style: str):
    """A CPU stand-in for varlen_attn: causal attention within each [bounds[i], bounds[i+1]) span."""

    def attend(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, **kwargs):
        calls.append({"bounds": cu_seq_q.tolist(), "max": max_q, "dtype": cu_seq_q.dtype, **kwargs})
        assert cu_seq_q is cu_seq_k and max_q == max_k
        assert kwargs.pop("window_size" if style == "window" else "is_causal") in ((-1, 0), True)
        gqa = kwargs.pop("enable_gqa", False)
        assert gqa or q.shape[1] == k.shape[1], "grouped KV heads need enable_gqa or repeated heads"
        scale = kwargs.pop("scale")
        assert not kwargs
        spans = cu_seq_q.tolist()
        outs = [F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1) for t in (q, k, v)), is_causal=True,
                                               scale=scale, enable_gqa=gqa).transpose(0, 1)
                for a, b in zip(spans, spans[1:], strict=False)]
        return torch.cat(outs)

    if style == "window":
        def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None, window_size=(-1, -1),
                        enable_gqa=False):
            return attend(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale,
                          window_size=window_size, enable_gqa=enable_gqa)
    else:  # torch 2.10's spelling, without grouped KV heads
        def varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, is_causal=False, scale=None):
            return attend(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale, is_causal=is_causal)
    return varlen_attn


@pytest.fixture(params=["window", "is_causal"])
def stand_in(request, monkeypatch):
    import torch.nn.attention.varlen as varlen

    calls: list[dict] = []
    monkeypatch.setattr(varlen, "varlen_attn", reference_varlen(calls, request.param))
    return calls


class Module(torch.nn.Module):
    pass


def test_a_packed_row_through_varlen_equals_one_sdpa_call_per_sample(stand_in):
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 1, 9, 3])
    query = torch.randn(1, 4, 18, 8, generator=generator)
    key, value = (torch.randn(1, 2, 18, 8, generator=generator) for _ in range(2))
    expected, _ = packed_sdpa_forward(Module(), query, key, value, None, scaling=0.3, packed_lengths=lengths)
    got, _ = packed_varlen_forward(Module(), query, key, value, None, scaling=0.3, packed_lengths=lengths)
    assert got.shape == expected.shape == (1, 18, 4, 8)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    assert stand_in == [{"bounds": [0, 5, 6, 15, 18], "max": 9, "dtype": torch.int32, "scale": 0.3,
                         **({"window_size": (-1, 0), "enable_gqa": True} if "window_size" in stand_in[0]
                            else {"is_causal": True})}]


def test_a_row_that_does_not_add_up_is_refused(stand_in):
    query = torch.zeros(1, 2, 6, 8)
    with pytest.raises(ValueError, match="one row of 5 tokens"):
        packed_varlen_forward(Module(), query, query, query, None, packed_lengths=torch.tensor([2, 3]))


def test_the_tiny_model_gives_the_same_logprobs_and_gradients_with_varlen(stand_in, tmp_path):
    """The whole model (registration, the keyword through every layer) with the stand-in kernel."""
    model_path = tiny_model(tmp_path / "tiny")
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0})
    samples = make_samples(3, count=5)
    results = {}
    for name in (packed_attention.PACKED_SDPA, packed_attention.PACKED_VARLEN):
        model = build_policy(config, model_path, CPU, torch.float32)
        model.set_attn_implementation(name)  # past build_policy's CUDA check, for the stand-in kernel
        results[name] = logprobs_and_grads(model, samples, CPU)
    assert len(stand_in) == 2  # one call per layer of the tiny model, for the one packed row
    (logp_sdpa, grad_sdpa), (logp_varlen, grad_varlen) = results.values()
    torch.testing.assert_close(logp_varlen, logp_sdpa, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad_varlen, grad_sdpa, atol=1e-5, rtol=1e-4)


def logprobs_and_grads(model, samples, device):
    """Log-probs and the adapter gradient of `samples` packed in one row, the LoRA B matrices non-zero."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(name))) * 0.1)
    (mb,) = packed_micro_batches(samples, 512, device)
    logp, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, prefix_len=mb.prefix_len,
                             loss_index=mb.loss_index, padded=mb.padded, position_ids=mb.position_ids,
                             document_lengths=mb.document_lengths)
    logp.float().sum().backward()
    return logp.detach().float(), torch.cat([p.grad.float().flatten() for p in trainable_parameters(model)])


def test_varlen_on_a_machine_without_cuda_is_refused_with_the_fix(tmp_path):
    config = tiny_config(tmp_path, **{"trainer.model.attention": "varlen"})
    with pytest.raises(ValueError, match=r'needs a CUDA GPU, a bf16 or fp16 model and torch 2.10\+ \(here: cpu, '
                                         r'float32, torch .*\); use "sdpa" or "auto"'):
        build_policy(config, tiny_model(tmp_path / "tiny"), CPU, torch.float32)


@pytest.mark.parametrize(("device", "dtype", "expected"), [("cpu", torch.float32, "sdpa"), ("cpu", torch.bfloat16, "sdpa"),
                                                          ("cuda", torch.float32, "sdpa"), ("cuda", torch.bfloat16, "varlen")])
def test_auto_takes_varlen_only_where_flash_attention_runs(device, dtype, expected):
    from prime_lora.trainer.model import pick_attention

    assert pick_attention("auto", torch.device(device), dtype) == expected
    assert pick_attention("sdpa", torch.device(device), dtype) == "sdpa"


def test_auto_on_cpu_loads_prime_sdpa(tmp_path):
    model = build_policy(tiny_config(tmp_path), tiny_model(tmp_path / "tiny"), CPU, torch.float32)
    assert model.config._attn_implementation == packed_attention.PACKED_SDPA


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("head_dim", [8, 128])
def test_varlen_on_cuda_matches_prime_sdpa(tmp_path, head_dim):
    """The real kernel: log-probs and adapter gradients of a packed row in bf16 equal prime_sdpa's."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    shape = Qwen3Config(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim, max_position_embeddings=512)
    Qwen3ForCausalLM(shape).save_pretrained(tmp_path / "tiny")
    samples = make_samples(7, count=12)
    cuda = torch.device("cuda")
    results = {}
    for attention in ("sdpa", "varlen"):
        config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0, "trainer.model.attention": attention,
                                          "trainer.model.compile": False})
        model = build_policy(config, str(tmp_path / "tiny"), cuda, torch.bfloat16)
        results[attention] = logprobs_and_grads(model, samples, cuda)
    (logp_sdpa, grad_sdpa), (logp_varlen, grad_varlen) = results["sdpa"], results["varlen"]
    assert (logp_varlen - logp_sdpa).abs().max() < 2e-2 and (logp_varlen - logp_sdpa).abs().mean() < 2e-3
    assert F.cosine_similarity(grad_varlen, grad_sdpa, dim=0) > 0.999
