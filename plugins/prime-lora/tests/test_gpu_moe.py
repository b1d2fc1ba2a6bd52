"""A Mixture-of-Experts model on CUDA (bf16): the grouped-GEMM experts with peft's expert adapters agree
with the eager expert loop, and the trainer's defaults (grouped_mm, compiled layers) train the experts'
adapters. Runs only where a GPU is present."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import VOCAB, make_samples, tiny_config, tiny_moe_model, write_batch  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
CUDA = torch.device("cuda")


def test_grouped_mm_experts_agree_with_the_eager_loop_in_bf16(tmp_path):
    from prime_lora.trainer.model import build_policy, compute_precision

    path = tiny_moe_model(tmp_path / "moe", "qwen3_moe")
    results = []
    for implementation in ("eager", "grouped_mm"):
        config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0, "trainer.model.compile": False,
                                          "trainer.model.experts_implementation": implementation})
        model = build_policy(config, path, CUDA, torch.bfloat16)
        generator = torch.Generator().manual_seed(1)
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.data = (torch.randn(param.shape, generator=generator) * 0.1).to(param)
        ids = torch.randint(1, VOCAB, (2, 64), generator=generator).to(CUDA)
        with compute_precision(model, CUDA.type):  # bf16 base, fp32 adapters computing in bf16, as the trainer runs
            logits = model(input_ids=ids).logits.float()
        logits.logsumexp(-1).sum().backward()
        grads = {n: p.grad.float() for n, p in model.named_parameters() if ".experts." in n and p.grad is not None}
        results.append((logits.detach(), grads))
    (eager, eager_grads), (grouped, grouped_grads) = results
    assert len(eager_grads) == len(grouped_grads) == 8
    torch.testing.assert_close(grouped, eager, atol=5e-2, rtol=5e-2)
    for name, grad in eager_grads.items():
        scale = float(grad.abs().max())
        assert scale > 0 and float((grouped_grads[name] - grad).abs().max()) < 0.05 * scale, name


def test_the_trainer_defaults_train_the_expert_adapters_on_cuda(tmp_path):
    from safetensors.torch import load_file

    from prime_lora.trainer.loop import train

    path = tiny_moe_model(tmp_path / "moe", "qwen3_moe")
    out = tmp_path / "run"
    for step in (1, 2):
        write_batch(out, step, make_samples(step, count=6))
    assert train(tiny_config(out, **{"trainer.model.lora.dropout": 0.0}), out, path, None) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(r["grad_norm"] > 0 for r in rows)
    adapter = load_file(str(out / "weights" / "step_2" / "adapter_model.safetensors"))
    experts_b = [k for k in adapter if ".experts." in k and "lora_B" in k]
    assert len(experts_b) == 4 and all(float(adapter[k].abs().max()) > 0 for k in experts_b)
