"""One training step: no optimizer step without signal, one host sync per step, timing and metrics."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

from prime_cli.train.config import LossConfig  # noqa: E402
from prime_lora.trainer.batches import micro_batches  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402
from prime_lora.trainer.loss import policy_loss  # noqa: E402
from prime_lora.trainer.model import build_policy, trainable_parameters  # noqa: E402
from prime_lora.trainer.optim import build_optimizer, build_scheduler  # noqa: E402
from prime_lora.trainer.step import train_step  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def _trainer(model_path, config):
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
    params = trainable_parameters(model)
    optimizer = build_optimizer(params, config)
    return model, params, optimizer, build_scheduler(optimizer, config)


def test_a_zero_advantage_batch_leaves_the_adapter_unchanged(model_path, tmp_path):
    """AdamW's momentum from an earlier step would move the adapter on a batch without signal."""
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0})
    model, params, optimizer, scheduler = _trainer(model_path, config)
    first = train_step(model, optimizer, scheduler, params, make_samples(1), config, torch.device("cpu"), 0)
    assert first.grad_norm > 0
    before = [p.detach().clone() for p in params]
    flat = make_samples(2)
    for sample in flat:
        sample["advantage"] = 0.0
    result = train_step(model, optimizer, scheduler, params, flat, config, torch.device("cpu"), 0)
    assert all(torch.equal(a, p) for a, p in zip(before, params, strict=True))
    assert not first.as_metrics()["zero_advantage"]
    metrics = result.as_metrics()
    assert metrics["zero_advantage"] is True and metrics["skipped"] is False and metrics["grad_norm"] == 0.0
    assert metrics["num_tokens"] > 0 and metrics["entropy"] > 0  # the forward still reports the batch
    assert scheduler.last_epoch == 2  # the schedule follows the step count, as after a skipped step


def test_a_zero_advantage_step_is_logged(model_path, tmp_path, capsys):
    out = tmp_path / "flat"
    samples = make_samples(3)
    for sample in samples:
        sample["advantage"] = 0.0
    write_batch(out, 1, samples)
    train(tiny_config(out, max_steps=1), out, model_path, None)
    row = json.loads((out / "metrics.jsonl").read_text())
    assert row["zero_advantage"] is True and row["skipped"] is False
    assert "no optimizer step: every advantage is 0" in capsys.readouterr().out


def test_host_syncs_do_not_grow_with_micro_batches(model_path, tmp_path, monkeypatch):
    calls = []
    original = torch.Tensor.item

    def counting_item(self):
        calls.append(1)
        return original(self)

    counts = []
    for size in (6, 1):
        config = tiny_config(tmp_path, **{"trainer.micro_batch_size": size})
        model, params, optimizer, scheduler = _trainer(model_path, config)
        calls.clear()
        monkeypatch.setattr(torch.Tensor, "item", counting_item)
        train_step(model, optimizer, scheduler, params, make_samples(4, count=6), config, torch.device("cpu"), 0)
        monkeypatch.setattr(torch.Tensor, "item", original)
        counts.append(len(calls))
    assert counts[0] == counts[1], counts


def test_training_time_waits_for_the_device(monkeypatch):
    from prime_lora.trainer import step

    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    step.wait_for_device(torch.device("cuda", 0))
    step.wait_for_device(torch.device("cpu"))
    assert synced == [torch.device("cuda", 0)]


def test_forward_tokens_count_padding_and_shared_prompts_once(model_path, tmp_path):
    config = tiny_config(tmp_path, **{"trainer.micro_batch_size": 2, "trainer.pack": False})
    model, params, optimizer, scheduler = _trainer(model_path, config)
    samples = make_samples(7, count=5)
    result = train_step(model, optimizer, scheduler, params, samples, config, torch.device("cpu"), 0)
    batches = micro_batches(samples, 2, 0, torch.device("cpu"), share_prefix=True)
    run = sum(mb.prefix_len + mb.input_ids.shape[0] * (mb.input_ids.shape[1] - mb.prefix_len) for mb in batches)
    assert result.forward_tokens == run
    assert result.all_tokens == sum(len(s["input_ids"]) for s in samples) != run  # padding differs
    metrics = result.as_metrics()
    assert metrics["forward_tokens_per_s"] == pytest.approx(run / result.train_s)
    assert metrics["tokens_per_s"] == pytest.approx(result.all_tokens / result.train_s)
    packed = tiny_config(tmp_path, **{"trainer.micro_batch_size": 2})  # packing (the default) runs no padding
    model, params, optimizer, scheduler = _trainer(model_path, packed)
    result = train_step(model, optimizer, scheduler, params, samples, packed, torch.device("cpu"), 0)
    assert result.forward_tokens == result.all_tokens


def test_loss_splits_masking_and_mismatch_by_side():
    logp = torch.tensor([-1.0, -2.0, -0.5, -3.0, -9.0])
    inference = torch.tensor([-1.0, -1.5, -3.0, -3.1, -1.0])
    parts = policy_loss(logp, inference, torch.ones(5), LossConfig(), total_loss_tokens=5)
    d = [0.0, -0.5, 2.5, 0.1, -8.0]  # ratio e^2.5 > 8: masked high; e^-8 < 1/8: masked low
    k3 = [math.exp(x) - x - 1 for x in d]
    assert float(parts.masked_low) == 1 and float(parts.masked_high) == 1
    assert float(parts.mismatch_kl_masked_sum) == pytest.approx(k3[2] + k3[4], rel=1e-5)
    assert float(parts.mismatch_kl_sum) == pytest.approx(sum(k3), rel=1e-5)


def test_step_metrics_report_the_split_and_peak_memory(model_path, tmp_path):
    config = tiny_config(tmp_path)
    model, params, optimizer, scheduler = _trainer(model_path, config)
    samples = make_samples(8, count=4)
    samples[0]["inference_logprobs"] = [0.0] + [-30.0] * (len(samples[0]["input_ids"]) - 1)  # ratio >> 8
    masked_tokens = sum(samples[0]["loss_mask"][1:])
    metrics = train_step(model, optimizer, scheduler, params, samples, config, torch.device("cpu"), 0).as_metrics()
    total = metrics["num_tokens"]
    assert metrics["masked_high_fraction"] == pytest.approx(masked_tokens / total)
    assert metrics["masked_low_fraction"] == 0.0
    assert metrics["masked_fraction"] == pytest.approx(masked_tokens / total)
    # the masked tokens carry the big mismatch; the kept ones are near on-policy (random tiny model: ~-4.6)
    assert metrics["mismatch_kl_masked"] > 1000 * metrics["mismatch_kl_unmasked"] > 0
    assert metrics["mismatch_kl"] == pytest.approx(
        (metrics["mismatch_kl_masked"] * masked_tokens + metrics["mismatch_kl_unmasked"] * (total - masked_tokens)) / total)
    assert metrics["peak_memory_gib"] > 0.01  # this process's max RSS on CPU
