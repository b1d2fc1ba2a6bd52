"""The chunked LM head: exact log-probs and gradients, fp32 logits, and saved memory that does not grow
with tokens x vocabulary."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer.batches import micro_batches  # noqa: E402
from prime_lora.trainer.logprobs import head_logprobs, inner_model_and_head, token_logprobs  # noqa: E402
from prime_lora.trainer.model import build_policy, compute_precision  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def _reference_logprobs(model, mb, temperature):
    """The plain full-model computation: every position's logits, log_softmax, the targets gathered."""
    logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits.float() / temperature
    log_probs = torch.log_softmax(logits[:, :-1], -1)
    mask = mb.loss_mask[:, 1:].bool()
    return log_probs.gather(-1, mb.input_ids[:, 1:, None]).squeeze(-1)[mask]


def test_gradients_equal_autograd_through_the_full_model(model_path, tmp_path):
    """LoRA weights and the (tied) head/embedding weight, when it trains, get autograd's gradients."""
    config = tiny_config(tmp_path, **{"trainer.model.lora.dropout": 0.0})
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
    _, head = inner_model_and_head(model)
    head.weight.requires_grad_(True)  # as with modules_to_save / trained tied embeddings
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    params = [p for p in model.parameters() if p.requires_grad]
    (mb,) = micro_batches(make_samples(5, count=4), 8, 0, torch.device("cpu"))
    weights = torch.linspace(-1, 1, mb.loss_tokens)
    grads = []
    for compute in (lambda: token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, 0.7)[0],
                    lambda: _reference_logprobs(model, mb, 0.7)):
        model.zero_grad(set_to_none=True)
        logp = compute()
        (logp * weights).sum().backward()
        grads.append([p.grad.clone() for p in params])
    ours, reference = grads
    assert ours[-1].abs().sum() > 0 and len(ours) == len(reference)
    for a, b in zip(ours, reference, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)


def test_frozen_head_gets_no_gradient_and_hidden_does():
    hidden = torch.randn(5, 8, requires_grad=True)
    head = torch.nn.Linear(8, 11, bias=False).requires_grad_(False)
    logp, _ = head_logprobs(hidden, head, torch.randint(0, 11, (5,)), 1.0)
    logp.sum().backward()
    assert head.weight.grad is None and hidden.grad is not None and hidden.grad.abs().sum() > 0


def test_head_with_bias_matches_autograd():
    torch.manual_seed(0)
    hidden = torch.randn(7, 8, requires_grad=True)
    head = torch.nn.Linear(8, 13)
    targets = torch.randint(0, 13, (7,))
    logp, entropy = head_logprobs(hidden, head, targets, 0.5, chunk_tokens=3)
    logp.sum().backward()
    ours = [hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()]
    hidden.grad, head.weight.grad, head.bias.grad = None, None, None
    reference = torch.log_softmax(head(hidden) / 0.5, -1)
    assert torch.allclose(logp, reference.gather(-1, targets[:, None]).squeeze(-1), atol=1e-6)
    assert torch.allclose(entropy, -(reference.exp() * reference).sum(-1), atol=1e-5)
    reference.gather(-1, targets[:, None]).sum().backward()
    for a, b in zip(ours, [hidden.grad, head.weight.grad, head.bias.grad], strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_bf16_model_gets_fp32_head_logits(model_path, tmp_path):
    """The head's matmul runs in fp32 on the bf16 hidden states and weight, not in bf16 then cast."""
    model = build_policy(tiny_config(tmp_path), model_path, torch.device("cpu"), torch.bfloat16)
    model.eval()
    (mb,) = micro_batches(make_samples(6, count=4), 8, 0, torch.device("cpu"))
    decoder, head = inner_model_and_head(model)
    with torch.no_grad():
        logp, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, 1.0)
        with compute_precision(model, "cpu"):  # the adapters compute in bf16 (mixed precision), as in training
            hidden = decoder(input_ids=mb.input_ids, attention_mask=mb.attention_mask).last_hidden_state
        positions = hidden[:, :-1][mb.loss_mask[:, 1:].bool()]
        exact = torch.log_softmax(positions.float() @ head.weight.float().T, -1)
        targets = mb.input_ids[:, 1:][mb.loss_mask[:, 1:].bool()]
        expected = exact.gather(-1, targets[:, None]).squeeze(-1)
    assert logp.dtype == torch.float32
    assert torch.allclose(logp, expected, atol=1e-5), (logp - expected).abs().max()


def _saved_bytes(tokens: int, vocab: int, hidden_size: int = 8) -> int:
    torch.manual_seed(0)
    hidden = torch.randn(tokens, hidden_size, requires_grad=True)
    head = torch.nn.Linear(hidden_size, vocab, bias=False).requires_grad_(False)
    targets = torch.randint(0, vocab, (tokens,))
    saved = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logp, _ = head_logprobs(hidden, head, targets, 1.0)
    logp.sum().backward()
    return sum(saved)


def test_saved_memory_does_not_scale_with_tokens_times_vocabulary():
    vocab = 4000
    small, large = _saved_bytes(1000, vocab), _saved_bytes(3000, vocab)
    per_token = (large - small) / 2000
    # a kept fp32 log_softmax would be vocab x 4 = 16,000 bytes per token; hidden (8 x fp32) and the
    # target (int64) are 40
    assert per_token <= 8 * 4 + 8, per_token


def test_host_computed_loss_index_gives_the_same_logprobs(model_path, tmp_path):
    """The step passes MicroBatch.loss_index/padded (computed before the copy to the device); the result
    equals finding the loss positions from the mask, with and without a shared prompt."""
    from lora_tiny import make_group_samples

    model = build_policy(tiny_config(tmp_path), model_path, torch.device("cpu"), torch.float32)
    model.eval()
    samples = make_group_samples(9, groups=2, per_group=3) + make_samples(9, count=3)
    batches = micro_batches(samples, 3, 0, torch.device("cpu"), share_prefix=True)
    assert {mb.prefix_len > 0 for mb in batches} == {True, False} and any(mb.padded for mb in batches)
    with torch.no_grad():
        for mb in batches:
            args = (model, mb.input_ids, mb.attention_mask, mb.loss_mask, 0.9, mb.prefix_len)
            given, from_mask = token_logprobs(*args, mb.loss_index, mb.padded), token_logprobs(*args)
            assert given[0].shape == (mb.loss_tokens,)
            assert torch.equal(given[0], from_mask[0]) and torch.equal(given[1], from_mask[1])
