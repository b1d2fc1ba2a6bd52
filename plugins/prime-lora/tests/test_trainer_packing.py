"""Packing: samples end to end in rows of a token budget give the log-probs, loss and adapter gradients of
the padded step (fp32 on CPU), single- and multi-turn, under plain and truncated/penalised sampling."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_group_samples, make_samples, multi_turn_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer.batches import loss_token_count, micro_batches  # noqa: E402
from prime_lora.trainer.logprobs import token_logprobs  # noqa: E402
from prime_lora.trainer.loss import policy_loss  # noqa: E402
from prime_lora.trainer.model import build_policy, trainable_parameters  # noqa: E402
from prime_lora.trainer.optim import build_optimizer, build_scheduler  # noqa: E402
from prime_lora.trainer.packed_attention import supports_packing  # noqa: E402
from prime_lora.trainer.packing import (  # noqa: E402
    first_fit_decreasing,
    packed_micro_batches,
    plan_micro_batches,
)
from prime_lora.trainer.sampling import SamplingTransform  # noqa: E402
from prime_lora.trainer.step import train_step  # noqa: E402

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def policy(model_path, tmp_path):
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0})
    model = build_policy(config, model_path, CPU, torch.float32)
    with torch.no_grad():  # non-zero B so that every LoRA matrix gets a gradient
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(len(name)))
    return config, model


def run(model, config, batches, total, sampling):
    """Per-token log-probs keyed by (sample tokens, position), the loss and the adapter gradient."""
    model.zero_grad()
    logps, loss_sum = {}, 0.0
    for mb in batches:
        logp, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, prefix_len=mb.prefix_len,
                                 loss_index=mb.loss_index, padded=mb.padded, sampling=sampling,
                                 position_ids=mb.position_ids, document_lengths=mb.document_lengths)
        loss = policy_loss(logp, mb.inference_logprobs, mb.advantages, config.trainer.loss, total).loss
        loss.backward()
        loss_sum += loss.item()
        offset = 0
        for ids, mask in sample_spans(mb):
            for position in [i for i in range(1, len(mask)) if mask[i]]:
                logps[(ids, position)] = logp[offset].item()
                offset += 1
    return logps, loss_sum, torch.cat([p.grad.flatten() for p in trainable_parameters(model)])


def sample_spans(mb):
    """(token ids, loss mask) of each sample of a micro-batch, in the order of its loss tokens."""
    if mb.document_lengths is None:
        for row in range(mb.input_ids.shape[0]):
            keep = mb.attention_mask[row].bool()
            yield tuple(mb.input_ids[row, keep].tolist()), mb.loss_mask[row, keep].tolist()
        return
    start = 0
    for length in mb.document_lengths:
        yield tuple(mb.input_ids[0, start:start + length].tolist()), mb.loss_mask[0, start:start + length].tolist()
        start += length


SAMPLINGS = {"plain": SamplingTransform(temperature=0.9),
             "truncated-penalised": SamplingTransform(temperature=0.8, top_k=40, top_p=0.9, repetition_penalty=1.4)}


@pytest.mark.parametrize("sampling", list(SAMPLINGS), ids=list(SAMPLINGS))
def test_packed_rows_give_the_padded_steps_logprobs_loss_and_gradients(model_path, tmp_path, sampling):
    samples = make_samples(11, count=5) + multi_turn_samples(12, count=4) + make_group_samples(13, groups=1, per_group=3)
    total = loss_token_count(samples)
    config, model = policy(model_path, tmp_path)
    packed = packed_micro_batches(samples, budget=40, device=CPU)
    assert len(packed) > 1 and any(len(mb.document_lengths) > 2 for mb in packed)  # several rows, several samples each
    assert all(mb.input_ids.shape == (1, sum(mb.document_lengths)) for mb in packed)
    assert sorted(n for mb in packed for n in mb.document_lengths) == sorted(len(s["input_ids"]) for s in samples)
    plain_logps, plain_loss, plain_grad = run(model, config, micro_batches(samples, 4, 0, CPU), total,
                                              SAMPLINGS[sampling])
    packed_logps, packed_loss, packed_grad = run(model, config, packed, total, SAMPLINGS[sampling])
    assert plain_logps.keys() == packed_logps.keys() and len(plain_logps) == total
    assert max(abs(plain_logps[k] - packed_logps[k]) for k in plain_logps) < 1e-5
    assert abs(plain_loss - packed_loss) < 1e-5
    assert plain_grad.abs().sum() > 0
    assert torch.allclose(plain_grad, packed_grad, atol=1e-5)


def test_a_filler_to_the_budget_changes_nothing(model_path, tmp_path):
    """Fixed-shape rows (for compiled layers) end with a filler sample without loss tokens."""
    samples = multi_turn_samples(21, count=3)
    config, model = policy(model_path, tmp_path)
    total = loss_token_count(samples)
    exact = packed_micro_batches(samples, budget=64, device=CPU)
    filled = packed_micro_batches(samples, budget=64, device=CPU, pad_to_budget=True)
    assert all(mb.input_ids.shape == (1, 64) for mb in filled)
    a, b = run(model, config, exact, total, SAMPLINGS["plain"]), run(model, config, filled, total, SAMPLINGS["plain"])
    assert a[0].keys() == b[0].keys() and max(abs(a[0][k] - b[0][k]) for k in a[0]) < 1e-6
    assert torch.allclose(a[2], b[2], atol=1e-6)


def test_first_fit_decreasing_fills_rows_within_the_budget():
    rng = random.Random(0)
    lengths = [rng.randint(1, 50) for _ in range(200)] + [120]
    rows = first_fit_decreasing(lengths, budget=100)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert [lengths[i] for row in rows for i in row if sum(lengths[j] for j in row) > 100] == [120]  # alone
    assert len(rows) <= -(-sum(lengths) // 100) + 2  # close to the fewest rows possible


@pytest.mark.parametrize("ac", [None, {"freq": 1}], ids=["no-ac", "activation-checkpointing"])
def test_a_packed_step_takes_the_padded_steps_optimizer_step(model_path, tmp_path, ac):
    """With activation checkpointing, backward's recomputation must see the packed row's samples too."""
    samples = make_samples(31, count=6) + multi_turn_samples(32, count=3)
    adapters = []
    for pack in (False, True):
        config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0, "trainer.pack": pack,
                                          "trainer.micro_batch_tokens": 48, "trainer.model.ac": ac})
        model = build_policy(config, model_path, CPU, torch.float32)
        params = trainable_parameters(model)
        optimizer = build_optimizer(params, config)
        result = train_step(model, optimizer, build_scheduler(optimizer, config), params, samples, config, CPU, 0)
        assert result.grad_norm > 0
        adapters.append((result, [p.detach().clone() for p in params]))
    (padded, before), (packed, after) = adapters
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(before, after, strict=True))
    assert abs(padded.loss - packed.loss) < 1e-6 and abs(padded.grad_norm - packed.grad_norm) < 1e-5
    # padded rows run padding; packed rows run exactly the samples' tokens
    assert packed.forward_tokens == sum(len(s["input_ids"]) for s in samples) < padded.forward_tokens


def test_a_prompt_group_stays_on_its_kv_cache_only_where_that_runs_far_fewer_tokens():
    short = make_group_samples(41, groups=1, per_group=8)  # a 6-12 token prompt, 1-7 token completions
    for sample in short:  # a long prompt: the cache spares most of the work
        sample["input_ids"] = [7] * 60 + sample["input_ids"]
        sample["loss_mask"] = [0] * 60 + sample["loss_mask"]
        sample["inference_logprobs"] = [0.0] * 60 + sample["inference_logprobs"]
    long = make_group_samples(42, groups=1, per_group=8)
    for index, sample in enumerate(long):  # completions of very different lengths: padding would dominate
        extra = 5 + 40 * (index % 2)
        sample["input_ids"] += [9] * extra
        sample["loss_mask"] += [1] * extra
        sample["inference_logprobs"] += [-1.0] * extra
    batches = plan_micro_batches(short + long, pack=True, budget=256, size=8, pad_id=0, device=CPU,
                                 share_prefix=True)
    shared = [mb for mb in batches if mb.prefix_len > 0]
    packed = [mb for mb in batches if mb.document_lengths is not None]
    assert sum(mb.input_ids.shape[0] for mb in shared) == len(short)
    assert sum(len(mb.document_lengths) for mb in packed) == len(long)
    unpacked = plan_micro_batches(short + long, pack=False, budget=256, size=8, pad_id=0, device=CPU,
                                  share_prefix=True)
    assert all(mb.prefix_len > 0 for mb in unpacked)  # without packing every group shares its prompt


def test_models_with_a_sliding_window_are_not_packed(model_path, tmp_path):
    config, model = policy(model_path, tmp_path)
    assert supports_packing(model)
    model.config.sliding_window, model.config.use_sliding_window = 16, True
    assert not supports_packing(model)
