"""The trainer scores tokens under the distribution vLLM samples from: repetition penalty, temperature,
min_p, top_k and top_p applied to its logits as the sampler applies them, with gradients through the
surviving logits of the recomputing LM head."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import VOCAB, make_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer import sampling as sampling_module  # noqa: E402
from prime_lora.trainer.batches import micro_batches  # noqa: E402
from prime_lora.trainer.logprobs import _ChunkedHeadLogprobs, head_logprobs, token_logprobs  # noqa: E402
from prime_lora.trainer.model import build_policy  # noqa: E402
from prime_lora.trainer.sampling import SamplingTransform, SeenTokens, processed_logits  # noqa: E402

TRANSFORMS = {
    "top_k": SamplingTransform(temperature=0.7, top_k=5),
    "top_p": SamplingTransform(temperature=0.7, top_p=0.8),
    "min_p": SamplingTransform(temperature=0.7, min_p=0.1),
    "repetition_penalty": SamplingTransform(temperature=0.7, repetition_penalty=1.3),
    "top_k and top_p": SamplingTransform(temperature=1.2, top_k=8, top_p=0.6),
    "everything": SamplingTransform(temperature=0.9, top_k=10, top_p=0.9, min_p=0.02, repetition_penalty=1.5),
}


def reference_log_probs(logits: list[float], seen: set[int], t: SamplingTransform) -> list[float]:
    """One position, written from the definitions: -inf for the tokens the sampler cuts."""
    z = list(logits)
    if t.repetition_penalty != 1.0:
        z = [(x / t.repetition_penalty if x > 0 else x * t.repetition_penalty) if v in seen else x
             for v, x in enumerate(z)]
    z = [x / t.temperature for x in z]
    alive = set(range(len(z)))

    def probs() -> dict[int, float]:
        top = max(z[v] for v in alive)
        weights = {v: math.exp(z[v] - top) for v in alive}
        total = sum(weights.values())
        return {v: w / total for v, w in weights.items()}

    if t.min_p > 0:
        p = probs()
        alive = {v for v in alive if p[v] >= t.min_p * max(p.values())}
    if 0 < t.top_k < len(z):
        kth = sorted((z[v] for v in alive), reverse=True)[min(t.top_k, len(alive)) - 1]
        alive = {v for v in alive if z[v] >= kth}
    if t.top_p < 1.0:  # a token stays while the more probable tokens hold less than top_p
        p = probs()
        kept, above = set(), 0.0
        for v in sorted(alive, key=lambda v: -z[v]):
            if above < t.top_p:
                kept.add(v)
            above += p[v]
        alive = kept
    log_total = math.log(sum(math.exp(z[v]) for v in alive))
    return [z[v] - log_total if v in alive else -math.inf for v in range(len(z))]


def _ours(logits: torch.Tensor, seen: torch.Tensor, transform: SamplingTransform) -> torch.Tensor:
    return torch.log_softmax(processed_logits(logits, transform, seen), dim=-1)


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_the_transformation_matches_a_direct_reference(name):
    transform = TRANSFORMS[name]
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(12, 40, generator=generator) * 3
    seen = torch.rand(12, 40, generator=generator) < 0.3
    ours = _ours(logits, seen, transform)
    for row in range(logits.shape[0]):
        expected = torch.tensor(reference_log_probs(logits[row].tolist(), set(seen[row].nonzero().flatten().tolist()),
                                                    transform))
        assert torch.equal(torch.isinf(ours[row]), torch.isinf(expected)), f"row {row}: other tokens survive"
        alive = ~torch.isinf(expected)
        assert torch.allclose(ours[row][alive], expected[alive].float(), atol=1e-5)
    if transform.truncates:
        assert torch.isinf(ours).any()  # something was cut, so the check above meant something


def test_ties_at_the_top_k_boundary_all_survive():
    logits = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0, 0.5]])
    ours = _ours(logits, torch.zeros_like(logits, dtype=torch.bool), SamplingTransform(top_k=2))
    assert (~torch.isinf(ours)).sum() == 4
    assert torch.isinf(ours[0, 4:]).all()


def test_top_p_keeps_the_token_that_crosses_the_boundary_and_one_of_equal_ones():
    # probabilities 1/2, 1/4, 1/4: the top token holds less than 0.6, so a second survives (one of the two
    # equal ones: vLLM keeps exactly one, which one is up to the sort); with 0.4 the top token suffices
    logits = torch.tensor([[math.log(2.0), 0.0, 0.0]])
    no_seen = torch.zeros_like(logits, dtype=torch.bool)
    wide = _ours(logits, no_seen, SamplingTransform(top_p=0.6))
    assert (~torch.isinf(wide)).sum() == 2
    assert torch.allclose(wide[0, 0].exp(), torch.tensor(2 / 3))
    narrow = _ours(logits, no_seen, SamplingTransform(top_p=0.4))
    assert narrow[0, 0] == 0.0 and torch.isinf(narrow[0, 1:]).all()


def test_vllms_own_operations_give_the_same_processed_logprobs_bit_for_bit():
    """The sampler's code (CPU path) on the same logits, with repeated values to exercise the ties."""
    ops = pytest.importorskip("vllm.v1.sample.ops.topk_topp_sampler")
    from vllm._custom_ops import apply_repetition_penalties_torch

    transform = TRANSFORMS["everything"]
    generator = torch.Generator().manual_seed(5)
    logits = (torch.randn(16, 64, generator=generator) * 4).round(decimals=1)  # many equal values
    seen = torch.rand(16, 64, generator=generator) < 0.3
    theirs = logits.clone()
    apply_repetition_penalties_torch(theirs, seen, torch.zeros_like(seen),
                                     torch.full((16,), transform.repetition_penalty))
    theirs.div_(torch.full((16,), transform.temperature).unsqueeze(1))
    probs = torch.softmax(theirs, dim=-1)
    theirs.masked_fill_(probs < probs.amax(-1, keepdim=True).mul_(transform.min_p), -float("inf"))
    theirs = ops.apply_top_k_top_p_pytorch(theirs, torch.full((16,), transform.top_k),
                                           torch.full((16,), transform.top_p), allow_cpu_sync=True)
    assert torch.equal(_ours(logits, seen, transform), theirs.log_softmax(-1, dtype=torch.float32))


def test_a_sampled_token_survives_even_where_the_trainers_logits_would_cut_it():
    logits = torch.tensor([[5.0, 4.0, 0.0, -1.0]])
    transform = SamplingTransform(top_k=2)
    logp, entropy = sampling_module.processed_log_probs(logits, transform, None, torch.tensor([3]))
    assert math.isfinite(float(logp)) and float(logp) < -5
    assert math.isfinite(float(entropy))


def test_gradcheck_through_the_recomputing_head():
    """float64, a tiny vocabulary, three chunks: backward's recomputation through every step."""
    generator = torch.Generator().manual_seed(11)
    hidden = torch.randn(6, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(13, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    bias = torch.randn(13, dtype=torch.float64, generator=generator, requires_grad=True)
    targets = torch.randint(0, 13, (6,), generator=generator)
    input_ids = torch.randint(0, 13, (2, 5), generator=generator)
    first = sampling_module.first_occurrences(input_ids, 13)
    seen = SeenTokens(first, torch.tensor([0, 0, 0, 1, 1, 1]), torch.tensor([1, 3, 4, 2, 3, 4]))
    transform = SamplingTransform(temperature=0.8, top_k=9, top_p=0.9, min_p=0.01, repetition_penalty=1.4)
    with torch.no_grad():
        cut = torch.isinf(processed_logits(hidden @ weight.T + bias, transform, seen.mask(slice(None))))
    assert cut.any()  # the check covers truncated distributions

    def logp(h, w, b):
        return _ChunkedHeadLogprobs.apply(h, w, b, targets, transform, seen, 2)[0]

    assert torch.autograd.gradcheck(logp, (hidden, weight, bias))


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.mark.parametrize("share_prefix", [False, True])
def test_the_repetition_penalty_sees_each_samples_tokens_so_far(model_path, tmp_path, share_prefix):
    """Against the full model's logits, with each position's seen-set built token by token."""
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0})
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32).eval()
    samples = make_samples(2, count=4)
    for s in samples[1:]:  # one group: the same prompt
        prompt_len = samples[0]["loss_mask"].index(1)
        keep = s["loss_mask"].index(1)
        s["input_ids"] = samples[0]["input_ids"][:prompt_len] + s["input_ids"][keep:]
        s["loss_mask"] = [0] * prompt_len + s["loss_mask"][keep:]
        s["inference_logprobs"] = [0.0] * prompt_len + s["inference_logprobs"][keep:]
    transform = SamplingTransform(temperature=0.8, top_p=0.95, repetition_penalty=1.6)
    (mb,) = micro_batches(samples, 8, 0, torch.device("cpu"), share_prefix=share_prefix)
    assert (mb.prefix_len > 0) == share_prefix
    with torch.no_grad():
        ours, entropy = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, prefix_len=mb.prefix_len,
                                       sampling=transform)
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits.float()
    expected, expected_entropy = [], []
    for row in range(mb.input_ids.shape[0]):
        ids = mb.input_ids[row].tolist()
        for i in range(1, len(ids)):
            if mb.loss_mask[row, i]:
                log_probs = reference_log_probs(logits[row, i - 1].tolist(), set(ids[:i]), transform)
                expected.append(log_probs[ids[i]])
                expected_entropy.append(-sum(math.exp(x) * x for x in log_probs if x > -math.inf))
    assert ours.shape[0] == len(expected) == mb.loss_tokens
    assert torch.isfinite(ours).all()
    assert torch.allclose(ours, torch.tensor(expected), atol=1e-5)
    assert torch.allclose(entropy, torch.tensor(expected_entropy), atol=1e-5)
    plain, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, 0.8, prefix_len=mb.prefix_len)
    assert (ours - plain).abs().max() > 1e-3  # the penalty changed something


def test_plain_sampling_takes_the_fast_path(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("the plain softmax must not go through the sampler's transformation")

    monkeypatch.setattr(sampling_module, "processed_logits", refuse)
    monkeypatch.setattr("prime_lora.trainer.logprobs.processed_log_probs", refuse)
    hidden = torch.randn(5, 8, requires_grad=True)
    head = torch.nn.Linear(8, VOCAB, bias=False)
    targets = torch.randint(0, VOCAB, (5,))
    logp, _ = head_logprobs(hidden, head, targets, SamplingTransform(temperature=0.7))
    logp.sum().backward()
    expected = torch.log_softmax(head(hidden) / 0.7, -1).gather(-1, targets[:, None]).squeeze(-1)
    assert torch.allclose(logp, expected, atol=1e-6)


def test_a_training_step_scores_under_the_configured_sampling(model_path, tmp_path):
    """train_step passes orchestrator.sampling to the LM head: with top_k = 3 every token's entropy is at
    most log 4 (the plain softmax of this random 96-token model is near log 96), and the step trains."""
    from prime_lora.trainer.model import trainable_parameters
    from prime_lora.trainer.optim import build_optimizer, build_scheduler
    from prime_lora.trainer.step import train_step

    results = {}
    for top_k in (-1, 3):
        config = tiny_config(tmp_path, **{"orchestrator.sampling.top_k": top_k,
                                          "orchestrator.sampling.repetition_penalty": 1.2})
        torch.manual_seed(0)
        model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
        params = trainable_parameters(model)
        optimizer = build_optimizer(params, config)
        scheduler = build_scheduler(optimizer, config)
        results[top_k] = train_step(model, optimizer, scheduler, params, make_samples(7), config,
                                    torch.device("cpu"), 0)
    assert results[-1].entropy > 3.0
    assert 0 < results[3].entropy <= math.log(4) + 1e-6  # the top 3, and the sampled token if not among them
    assert not results[3].skipped and math.isfinite(results[3].loss) and math.isfinite(results[3].mismatch_kl)
