"""The trainer's pieces on a tiny model: the loss by hand, logprobs, micro-batching, skip, resume identity."""

from __future__ import annotations

import json
import math
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_group_samples, make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

from prime_cli.train.config import LossConfig  # noqa: E402
from prime_lora.trainer.batches import micro_batches  # noqa: E402
from prime_lora.trainer.logprobs import token_logprobs  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402
from prime_lora.trainer.loss import policy_loss  # noqa: E402
from prime_lora.trainer.model import build_policy  # noqa: E402
from prime_lora.trainer.optim import lr_factor  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def test_loss_matches_a_hand_computation():
    logp = torch.tensor([-1.0, -2.0, -0.5, -3.0], requires_grad=True)
    inference = torch.tensor([-1.0, -1.5, -3.0, -3.1])
    adv = torch.tensor([1.0, 1.0, -0.5, 2.0])
    parts = policy_loss(logp, inference, adv, LossConfig(), total_loss_tokens=8)
    # ratios: 1, e^-0.5, e^2.5 (12.18, outside [0.125, 8] -> masked), e^0.1
    expected = -(1 * 1.0 + math.exp(-0.5) * 1.0 + math.exp(0.1) * 2.0) / 8
    assert parts.loss.item() == pytest.approx(expected, rel=1e-6)
    assert parts.masked == 1 and parts.tokens == 4
    d = [0.0, -0.5, 2.5, 0.1]
    assert float(parts.mismatch_kl_sum) == pytest.approx(sum(math.exp(x) - x - 1 for x in d), rel=1e-5)
    parts.loss.backward()
    # d/dlogp of -(r*A)/N with r = exp(logp - inf) is -(r*A)/N; the masked token gets no gradient
    assert logp.grad[2].item() == 0.0
    assert logp.grad[1].item() == pytest.approx(-math.exp(-0.5) / 8, rel=1e-6)


def test_mismatch_kl_estimates_kl_from_the_sampler_to_the_trainer():
    # tokens are drawn from the inference policy p; the trainer's policy q differs. The k3 estimator's
    # mean over p's samples is KL(p || q); the mirrored formula (exp(-d) + d - 1) estimates nothing
    # meaningful here and explodes on tokens the trainer finds unlikely
    generator = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(50, generator=generator) * 2, dim=0)
    q = torch.softmax(torch.log(p) + torch.randn(50, generator=generator), dim=0)
    tokens = torch.multinomial(p, 200_000, replacement=True, generator=generator)
    logp_train, logp_inference = torch.log(q)[tokens], torch.log(p)[tokens]
    loss = LossConfig(log_ratio_clamp=50.0)
    parts = policy_loss(logp_train, logp_inference, torch.zeros_like(logp_train), loss, tokens.numel())
    exact = float((p * (torch.log(p) - torch.log(q))).sum())
    assert float(parts.mismatch_kl_sum) / tokens.numel() == pytest.approx(exact, rel=0.03)


def test_log_ratio_is_clamped_before_exp():
    logp = torch.tensor([0.0, -200.0], requires_grad=True)
    parts = policy_loss(logp, torch.tensor([-500.0, 0.0]), torch.tensor([1.0, 1.0]), LossConfig(), 2)
    assert math.isfinite(parts.loss.item()) and parts.masked == 2
    assert math.isfinite(parts.mismatch_kl_sum)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mismatch_kl_is_never_negative_for_tiny_log_ratios(dtype):
    """exp(d) - d - 1 computed as written rounds below 0 for |d| of 1e-7..1e-2 (a step printed kl -5.54e-10):
    every token's k3, and their sum, must be >= 0 and close to the exact value for the log-ratios given."""
    magnitudes = torch.logspace(-7, -2, 300, dtype=torch.float64)
    inference = torch.zeros(600, dtype=dtype)
    logp = torch.cat([magnitudes, -magnitudes]).to(dtype)
    d = (logp - inference).double()  # the log-ratios as the loss sees them, exactly
    exact = torch.expm1(d) - d
    for i in range(logp.numel()):
        part = policy_loss(logp[i:i + 1], inference[i:i + 1], torch.ones(1, dtype=dtype), LossConfig(), 1)
        assert float(part.mismatch_kl_sum) >= 0.0 and float(part.mismatch_kl_masked_sum) >= 0.0, float(d[i])
        # computed in float32: off by about an ulp of d, not of 1 (exp(d) - d - 1 is off by 6e-8 at any d)
        assert abs(float(part.mismatch_kl_sum) - float(exact[i])) <= 2.5e-7 * abs(float(d[i])), float(d[i])
    parts = policy_loss(logp, inference, torch.ones_like(logp), LossConfig(), logp.numel())
    assert float(parts.mismatch_kl_sum) == pytest.approx(float(exact.sum()), rel=1e-4)


def test_token_logprobs_equal_a_full_forward(model_path, tmp_path):
    config = tiny_config(tmp_path)
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
    model.eval()
    samples = make_samples(1)
    (mb,) = micro_batches(samples, 8, 0, torch.device("cpu"))
    with torch.no_grad():
        logp, entropy = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, temperature=0.7)
        full = torch.log_softmax(model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits / 0.7, -1)
    expected = []
    for row, sample in enumerate(sorted(samples, key=lambda s: len(s["input_ids"]))):
        for i in range(1, len(sample["input_ids"])):
            if sample["loss_mask"][i]:
                expected.append(full[row, i - 1, sample["input_ids"][i]].item())
    assert logp.shape[0] == len(expected) == mb.loss_tokens
    assert torch.allclose(logp, torch.tensor(expected), atol=1e-5)
    assert (entropy > 0).all()


def test_micro_batch_size_does_not_change_the_gradient(model_path, tmp_path):
    from prime_lora.trainer.batches import loss_token_count

    samples = make_samples(2, count=5)
    grads = []
    for size in (1, 5):
        config = tiny_config(tmp_path, **{"trainer.micro_batch_size": size, "trainer.model.lora.dropout": 0.0})
        model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
        with torch.no_grad():  # non-zero B so every LoRA matrix gets a gradient
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
        total = loss_token_count(samples)
        for mb in micro_batches(samples, size, 0, torch.device("cpu")):
            logp, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask)
            policy_loss(logp, mb.inference_logprobs, mb.advantages, config.trainer.loss, total).loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.requires_grad]))
    assert grads[0].abs().sum() > 0
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_a_shared_prompt_runs_once_with_the_same_logprobs_and_gradients(model_path, tmp_path):
    """Groups sharing a prompt: the prompt runs once, the completions (right-padded, of different
    lengths) on its KV cache; log-probs and LoRA gradients equal the row-by-row computation."""
    from prime_lora.trainer.batches import loss_token_count

    samples = make_group_samples(3, groups=2, per_group=4) + make_samples(4, count=1)  # and one loner
    shared = micro_batches(samples, 3, 0, torch.device("cpu"), share_prefix=True)
    assert [mb.prefix_len > 0 for mb in shared] == [True, True, True, True, False]  # 4 = 3 + 1 per group
    assert sum(mb.input_ids.shape[0] for mb in shared) == len(samples)
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0})
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    total = loss_token_count(samples)
    results = []
    for batches in (micro_batches(samples, 3, 0, torch.device("cpu")), shared):
        model.zero_grad()
        logps = {}
        for mb in batches:
            logp, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, prefix_len=mb.prefix_len)
            policy_loss(logp, mb.inference_logprobs, mb.advantages, config.trainer.loss, total).loss.backward()
            offset = 0  # key each token by (its sequence, its position) to compare across groupings
            for row in range(mb.input_ids.shape[0]):
                ids = tuple(mb.input_ids[row, mb.attention_mask[row].bool()].tolist())
                for pos in mb.loss_mask[row, 1:].nonzero().flatten().tolist():
                    logps[(ids, pos)] = logp[offset].item()
                    offset += 1
        results.append((logps, torch.cat([p.grad.flatten() for p in model.parameters() if p.requires_grad])))
    (plain, plain_grad), (fast, fast_grad) = results
    assert plain.keys() == fast.keys() and len(plain) == total
    assert max(abs(plain[k] - fast[k]) for k in plain) < 1e-5
    assert plain_grad.abs().sum() > 0
    assert torch.allclose(plain_grad, fast_grad, atol=1e-6)


def _adapter(output_dir, step):
    from safetensors.torch import load_file

    return load_file(str(output_dir / "weights" / f"step_{step}" / "adapter_model.safetensors"))


def test_training_writes_weights_checkpoints_and_metrics(model_path, tmp_path):
    out = tmp_path / "run"
    config = tiny_config(out)
    for step in (1, 2):
        write_batch(out, step, make_samples(step))
    assert train(config, out, model_path, None) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["num_tokens"] > 0 and r["grad_norm"] > 0 and not r["skipped"] and r["reward_mean"] == 0.5 for r in rows)
    assert (out / "checkpoints" / "step_2" / "trainer" / "optimizer.pt").exists()
    step0, step2 = _adapter(out, 0), _adapter(out, 2)
    assert all((v == 0).all() for k, v in step0.items() if "lora_B" in k)  # fresh adapter = the base model
    assert any(not torch.equal(step0[k], step2[k]) for k in step0)


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(model_path, tmp_path):
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    for out in (whole, resumed):
        for step in (1, 2):
            write_batch(out, step, make_samples(10 + step))
    train(tiny_config(whole), whole, model_path, None)
    first = tiny_config(resumed, max_steps=1)
    train(first, resumed, model_path, None)
    torch.manual_seed(1234)  # disturb the global RNG: resume must restore it
    train(tiny_config(resumed), resumed, model_path, 1)
    a, b = _adapter(whole, 2), _adapter(resumed, 2)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_resume_trains_with_the_new_configs_learning_rate_and_optimizer_settings(model_path, tmp_path):
    out = tmp_path / "run"
    for step in (1, 2, 3):
        write_batch(out, step, make_samples(20 + step))
    train(tiny_config(out, max_steps=1), out, model_path, None)  # lr 1e-2, constant
    changed = {"trainer.optim.lr": 3e-3, "trainer.optim.weight_decay": 0.05, "trainer.optim.betas1": 0.8}
    train(tiny_config(out, max_steps=3, **changed), out, model_path, 1)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["lr"]) for r in rows] == [(1, 1e-2), (2, 3e-3), (3, 3e-3)]
    saved = torch.load(out / "checkpoints" / "step_3" / "trainer" / "optimizer.pt", weights_only=False)
    groups = saved["param_groups"] if "param_groups" in saved else next(iter(saved.values()))["param_groups"]
    assert groups[0]["weight_decay"] == 0.05 and tuple(groups[0]["betas"])[0] == 0.8


def test_a_non_finite_step_is_skipped_and_logged(model_path, tmp_path):
    out = tmp_path / "nan"
    samples = make_samples(3)
    samples[0]["inference_logprobs"] = [float("nan")] * len(samples[0]["input_ids"])
    write_batch(out, 1, samples)
    config = tiny_config(out, max_steps=1)
    train(config, out, model_path, None)
    row = json.loads((out / "metrics.jsonl").read_text())
    assert row["skipped"] is True and row["loss"] is None
    step0, step1 = _adapter(out, 0), _adapter(out, 1)
    assert all(torch.equal(step0[k], step1[k]) for k in step0)


def test_merged_model_is_written_on_request(model_path, tmp_path):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "merged"
    write_batch(out, 1, make_samples(4))
    train(tiny_config(out, max_steps=1, **{"trainer.save_merged": True}), out, model_path, None)
    merged = AutoModelForCausalLM.from_pretrained(out / "weights" / "step_1" / "merged")
    assert not any("lora" in name for name, _ in merged.named_parameters())
    shutil.rmtree(out)


@pytest.mark.parametrize("kind", ["constant", "linear", "cosine"])
def test_schedules_warm_up_then_follow_their_shape(kind, tmp_path):
    config = tiny_config(tmp_path, max_steps=10, **{"trainer.scheduler.type": kind, "trainer.scheduler.warmup_steps": 2})
    factors = [lr_factor(s, config) for s in range(10)]
    assert factors[0] == 0.5 and factors[1] == 1.0 or factors[1] == pytest.approx(1.0)
    if kind == "constant":
        assert factors[-1] == 1.0
    else:
        assert factors[-1] < factors[3] <= 1.0


def test_metrics_carry_the_guides_names_beside_ours(tmp_path):
    # W&B gets the same names: test_wandb_run.py reads them back from an offline run
    from prime_lora.trainer.loop import MetricsLog

    log = MetricsLog(tmp_path, tiny_config(tmp_path))
    log.write({"step": 1, "reward_mean": 0.25, "reward_std": 0.5, "entropy": 1.5, "mismatch_kl": 0.01, "loss": 0.1})
    log.write({"step": 2, "loss": 0.2})  # a row without the source keys gets no guide names
    log.close()
    first, second = (json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())
    assert (first["reward/mean"], first["reward/std"], first["policy/entropy"], first["policy/kl"]) == (0.25, 0.5, 1.5, 0.01)
    assert (first["reward_mean"], first["entropy"], first["mismatch_kl"]) == (0.25, 1.5, 0.01)  # kept
    assert "reward/mean" not in second and "policy/kl" not in second
