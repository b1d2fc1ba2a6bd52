"""On-policy distillation in the trainer: per-token advantages (the orchestrator's token_advantages) replace
the sample's one advantage, and the loss's gradient is the hand-computed reverse-KL policy gradient."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, multi_turn_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer.batches import has_signal, loss_targets  # noqa: E402
from prime_lora.trainer.model import build_policy, trainable_parameters  # noqa: E402
from prime_lora.trainer.optim import build_optimizer, build_scheduler  # noqa: E402
from prime_lora.trainer.step import train_step  # noqa: E402

CPU = torch.device("cpu")
TEACHER_TAU = 0.5


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def test_token_advantages_replace_the_samples_advantage():
    sample = {"input_ids": [1, 2, 3, 4, 5], "loss_mask": [0, 0, 1, 0, 1], "inference_logprobs": [0, 0, -1, 0, -2],
              "advantage": 0.7}
    assert loss_targets(sample)[2] == [0.7, 0.7]
    distilled = {**sample, "token_advantages": [0.0, 0.0, -0.25, 0.0, 1.5]}
    assert loss_targets(distilled) == ([0, 0, 1, 0, 1], [-1.0, -2.0], [-0.25, 1.5])
    assert has_signal(sample) and has_signal(distilled)
    assert has_signal({**sample, "advantage": 0.0, "token_advantages": [0.0, 0.0, 0.0, 9.0, 0.1]})
    assert not has_signal({**sample, "token_advantages": [3.0, 0.0, 0.0, 9.0, 0.0]})  # none on a loss token
    with pytest.raises(ValueError, match="3 token_advantages for 5 tokens"):
        loss_targets({**sample, "token_advantages": [0.0, 1.0, 2.0]})


def distillation_config(tmp_path, pack):
    return tiny_config(tmp_path, **{"trainer.loss.teacher_tau": TEACHER_TAU, "trainer.loss.adv_tau": 0.0,
                                    "orchestrator.teacher_model": {"adapter": "teacher"}, "trainer.pack": pack,
                                    "trainer.model.lora.dropout": 0.0, "trainer.optim.max_norm": 1e6,
                                    "trainer.micro_batch_size": 2})


def own_logprobs(model, ids):
    """log p(token t | tokens < t) of the plain model, for t = 1.. (position 0 has none)."""
    logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1)


@pytest.mark.parametrize("pack", [True, False])
def test_the_distillation_gradient_equals_a_hand_computed_one(model_path, tmp_path, pack):
    config = distillation_config(tmp_path, pack)
    model = build_policy(config, model_path, CPU, torch.float32)
    with torch.no_grad():  # a student that is not the base model, and a gradient on every LoRA matrix
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(len(name)))
    params = trainable_parameters(model)
    model.train()
    rng = random.Random(0)
    samples = make_samples(5, count=3) + multi_turn_samples(6, 2)
    hand, total = 0.0, sum(sum(s["loss_mask"][1:]) for s in samples)
    for sample in samples:
        ids, mask = sample["input_ids"], sample["loss_mask"]
        student = own_logprobs(model, ids)
        own = [0.0] + student.tolist()
        teacher = [rng.uniform(-6.0, -0.5) if m and i else 0.0 for i, m in enumerate(mask)]
        advantages = [TEACHER_TAU * (teacher[i] - own[i]) if m and i else 0.0 for i, m in enumerate(mask)]
        # on-policy: the sampler's log-probs are the student's own; the environment's advantage plays no part
        sample.update(inference_logprobs=[o if m and i else 0.0 for i, (o, m) in enumerate(zip(own, mask, strict=True))],
                      teacher_logprobs=teacher, token_advantages=advantages, advantage=0.0)
        weights = torch.tensor(advantages[1:]) * torch.tensor(mask[1:], dtype=torch.float32)
        hand = hand - (weights * student).sum() / total  # -(1/N) sum_t A_t log p_t, A_t held constant
    expected = torch.autograd.grad(hand, params)
    optimizer = build_optimizer(params, config)
    result = train_step(model, optimizer, build_scheduler(optimizer, config), params, samples, config, CPU, 0)
    assert not result.zero_advantage and not result.skipped  # every `advantage` is 0: the token ones count
    assert result.mismatch_kl < 1e-9  # on-policy: ratio 1 on every token
    for p, want in zip(params, expected, strict=True):
        assert torch.allclose(p.grad, want, atol=1e-5, rtol=0)
    assert max(float(w.abs().max()) for w in expected) > 1e-3  # a gradient worth comparing
