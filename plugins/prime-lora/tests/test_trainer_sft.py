"""The SFT step: cross-entropy on the loss-mask (assistant) tokens, packed or not, equal to a reference."""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import VOCAB, multi_turn_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer.batch_source import MemoryBatches  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402
from prime_lora.trainer.model import build_policy, trainable_parameters  # noqa: E402
from prime_lora.trainer.optim import build_optimizer, build_scheduler  # noqa: E402
from prime_lora.trainer.packing import plan_micro_batches  # noqa: E402
from prime_lora.trainer.step import train_step  # noqa: E402

CPU = torch.device("cpu")
SFT_ALGO = {"type": "dataset_sft", "dataset": {"source": [{"dataset": "rows.jsonl"}]}}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def sft_config(tmp_path, **overrides):
    # sampling settings are the sampler's: SFT must ignore them (a reference at temperature 1 checks it)
    return tiny_config(tmp_path, **{"orchestrator.algo": SFT_ALGO, "trainer.model.lora.dropout": 0.0,
                                    "trainer.optim.max_norm": 1e6, "orchestrator.sampling.temperature": 0.7,
                                    "orchestrator.sampling.top_p": 0.8, **overrides})


def sft_samples(seed, count):
    """Multi-turn rows as SFT data: loss on the assistant tokens, no inference log-probs, no advantage."""
    return [{**s, "inference_logprobs": [0.0] * len(s["input_ids"]), "advantage": 0.0}
            for s in multi_turn_samples(seed, count)]


def policy(model_path, config):
    model = build_policy(config, model_path, CPU, torch.float32)
    with torch.no_grad():  # non-zero B: the adapter changes the model, and every LoRA matrix gets a gradient
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(len(name)))
    params = trainable_parameters(model)
    optimizer = build_optimizer(params, config)
    return model, params, optimizer, build_scheduler(optimizer, config)


def reference(model, params, samples):
    """torch's cross_entropy on the loss tokens of each sample run alone, over the batch's loss tokens; and its
    gradient."""
    total = sum(sum(s["loss_mask"][1:]) for s in samples)
    loss = 0.0
    for s in samples:
        ids = torch.tensor([s["input_ids"]])
        mask = torch.tensor(s["loss_mask"][1:], dtype=torch.bool)
        logits = model(input_ids=ids).logits[0, :-1].float()
        loss = loss + torch.nn.functional.cross_entropy(logits[mask], ids[0, 1:][mask], reduction="sum")
    loss = loss / total
    return loss.item(), torch.autograd.grad(loss, params)


@pytest.mark.parametrize("pack", [True, False])
def test_the_sft_loss_and_gradient_equal_torchs_cross_entropy(model_path, tmp_path, pack):
    config = sft_config(tmp_path, **{"trainer.pack": pack, "trainer.micro_batch_size": 2})
    assert config.is_sft
    model, params, optimizer, scheduler = policy(model_path, config)
    samples = sft_samples(3, count=5)
    if pack:  # several samples share a row
        assert len(plan_micro_batches(samples, pack=True, budget=256, size=2, pad_id=0, device=CPU)) < len(samples)
    model.train()
    expected_loss, expected_grads = reference(model, params, samples)
    result = train_step(model, optimizer, scheduler, params, samples, config, CPU, 0)
    assert result.loss == pytest.approx(expected_loss, abs=1e-5)
    for grad, expected in zip([p.grad for p in params], expected_grads, strict=True):
        assert torch.allclose(grad, expected, atol=1e-5)
    assert not result.skipped and result.num_tokens == sum(sum(s["loss_mask"][1:]) for s in samples)
    metrics = result.as_metrics()
    assert metrics["nll"] == metrics["loss"] and metrics["entropy"] > 0 and metrics["grad_norm"] > 0
    assert not {"mismatch_kl", "masked_fraction", "zero_advantage"} & metrics.keys()


def step_loss(model_path, tmp_path, sample):
    config = sft_config(tmp_path)
    model, params, optimizer, scheduler = policy(model_path, config)
    return train_step(model, optimizer, scheduler, params, [sample], config, CPU, 0).loss


def test_only_the_assistant_tokens_of_a_multi_turn_sample_count(model_path, tmp_path):
    # system/user, assistant, tool/user, assistant, then a user turn after the last reply
    turns = [([5, 6, 7, 8, 9], 0), ([20, 21, 22, 23], 1), ([40, 41, 42], 0), ([30, 31, 32], 1), ([50, 51, 52], 0)]
    ids = [t for tokens, _ in turns for t in tokens]
    mask = [m for tokens, m in turns for _ in tokens]
    sample = {"input_ids": ids, "loss_mask": mask, "inference_logprobs": [0.0] * len(ids), "advantage": 0.0}
    loss = step_loss(model_path, tmp_path, sample)
    last_user, last_reply = len(ids) - 1, len(ids) - 4  # neither is the context of a later assistant token
    assert mask[last_user] == 0 and mask[last_reply] == 1
    user_changed = {**sample, "input_ids": ids[:last_user] + [(ids[last_user] + 7) % VOCAB]}
    assert step_loss(model_path, tmp_path, user_changed) == loss
    reply_changed = {**sample, "input_ids": ids[:last_reply] + [(ids[last_reply] + 7) % VOCAB] + ids[last_reply + 1:]}
    assert step_loss(model_path, tmp_path, reply_changed) != pytest.approx(loss, abs=1e-4)
    everything = {**sample, "loss_mask": [1] * len(ids)}  # the same tokens, all counted: another loss
    assert step_loss(model_path, tmp_path, everything) != pytest.approx(loss, abs=1e-3)


def test_a_non_finite_sft_step_is_skipped(model_path, tmp_path):
    config = sft_config(tmp_path)
    model, params, optimizer, scheduler = policy(model_path, config)
    with torch.no_grad():
        params[0][0, 0] = float("nan")
    before = [p.detach().clone() for p in params[1:]]
    result = train_step(model, optimizer, scheduler, params, sft_samples(4, 2), config, CPU, 0)
    assert result.skipped and result.as_metrics()["loss"] is None
    assert all(torch.equal(a, p) for a, p in zip(before, params[1:], strict=True))


def test_three_sft_steps_through_the_loop_learn_a_memorised_sample(model_path, tmp_path, capsys):
    out = tmp_path / "run"
    config = sft_config(out, max_steps=3, **{"trainer.optim.lr": 3e-2})
    sample = sft_samples(5, 1)[0]
    assert train(config, out, model_path, None, batches=MemoryBatches({step: [sample] for step in (1, 2, 3)})) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows]
    assert losses[0] > losses[1] > losses[2]
    assert all(row["nll"] == row["loss"] and row["num_tokens"] == sum(sample["loss_mask"][1:]) for row in rows)
    assert all("mismatch_kl" not in row and "policy/kl" not in row for row in rows)
    assert {"tokens_per_s", "grad_norm", "lr", "entropy", "train_s", "peak_memory_gib"} <= rows[0].keys()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert len(lines) == 3
    assert all(re.fullmatch(r"step \d: loss [\d.]+ nll [\d.]+ grad_norm [\d.]+ train [\d.]+s", line) for line in lines)
