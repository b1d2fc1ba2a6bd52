"""Mixed precision: with a bf16 base, the adapters compute in bf16 (no fp32 casts around each adapted
projection) while their weights, gradients and optimizer state stay fp32; the log-probs stay within a
bound of the all-casting path. Runs on CPU (CPU autocast to bf16); CUDA's tensor-core head is GPU-marked."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model  # noqa: E402

from prime_lora.trainer.batches import micro_batches  # noqa: E402
from prime_lora.trainer.logprobs import head_logprobs, token_logprobs  # noqa: E402
from prime_lora.trainer.model import build_policy, trainable_parameters  # noqa: E402
from prime_lora.trainer.optim import build_optimizer, build_scheduler  # noqa: E402
from prime_lora.trainer.step import train_step  # noqa: E402

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def bf16_policy(model_path, tmp_path, mixed: bool):
    config = tiny_config(tmp_path, **{"model.dtype": "bfloat16", "trainer.model.lora.dropout": 0.0,
                                      "trainer.model.mixed_precision": mixed})
    model = build_policy(config, model_path, CPU, torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(len(name)))
    return config, model


def adapter_input_dtypes(model, mb) -> set[torch.dtype]:
    seen: set[torch.dtype] = set()
    hooks = [m.register_forward_pre_hook(lambda _m, args: seen.add(args[0].dtype))
             for name, m in model.named_modules() if name.endswith("lora_A.default")]
    try:
        token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def test_adapters_compute_in_bf16_and_keep_fp32_weights_and_gradients(model_path, tmp_path):
    (mb,) = micro_batches(make_samples(3, count=3), 8, 0, CPU)
    _, cast = bf16_policy(model_path, tmp_path, mixed=False)
    _, mixed = bf16_policy(model_path, tmp_path, mixed=True)
    assert adapter_input_dtypes(cast, mb) == {torch.float32}  # peft casts each input up (and the output back)
    assert adapter_input_dtypes(mixed, mb) == {torch.bfloat16}
    assert {p.dtype for p in trainable_parameters(mixed)} == {torch.float32}
    logp, _ = token_logprobs(mixed, mb.input_ids, mb.attention_mask, mb.loss_mask)
    assert logp.dtype == torch.float32  # the head is outside autocast
    logp.sum().backward()
    grads = [p.grad for p in trainable_parameters(mixed)]
    assert all(g is not None and g.dtype == torch.float32 for g in grads) and any(g.abs().sum() > 0 for g in grads)


def test_mixed_precision_logprobs_and_gradients_stay_near_the_casting_path(model_path, tmp_path):
    (mb,) = micro_batches(make_samples(4, count=4), 8, 0, CPU)
    results = []
    for mixed in (False, True):
        _, model = bf16_policy(model_path, tmp_path, mixed)
        logp, _ = token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask)
        logp.sum().backward()
        results.append((logp.detach(), torch.cat([p.grad.flatten() for p in trainable_parameters(model)])))
    (cast_logp, cast_grad), (mixed_logp, mixed_grad) = results
    assert (cast_logp - mixed_logp).abs().max() < 0.05  # bf16 rounding of the adapters' outputs only
    assert (cast_logp - mixed_logp).abs().mean() < 0.01
    cosine = torch.nn.functional.cosine_similarity(cast_grad, mixed_grad, dim=0)
    assert cosine > 0.99, float(cosine)


def test_a_mixed_precision_step_with_activation_checkpointing_recomputes_in_bf16(model_path, tmp_path):
    """Recomputation in backward runs outside the forward's autocast block; it must see the same state."""
    config = tiny_config(tmp_path, **{"model.dtype": "bfloat16", "trainer.model.ac": {"freq": 1}})
    model = build_policy(config, model_path, CPU, torch.bfloat16)
    params = trainable_parameters(model)
    optimizer = build_optimizer(params, config)
    result = train_step(model, optimizer, build_scheduler(optimizer, config), params, make_samples(5), config, CPU, 0)
    assert result.grad_norm > 0 and not result.skipped
    assert all(state["exp_avg"].dtype == torch.float32 for state in optimizer.state.values())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_tensor_core_head_matches_the_fp32_head():
    """bf16 x bf16 -> fp32 on tensor cores against the same bf16 values cast to fp32 first."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    hidden = torch.randn(4096, 1024, device="cuda", generator=generator).bfloat16().requires_grad_(True)
    head = torch.nn.Linear(1024, 151936, bias=False, device="cuda", dtype=torch.bfloat16)
    targets = torch.randint(0, 151936, (4096,), device="cuda", generator=generator)
    fast, _ = head_logprobs(hidden, head, targets, 1.0)
    (grad_fast,) = torch.autograd.grad(fast.sum(), hidden)
    reference = hidden.detach().float().requires_grad_(True)
    slow, _ = head_logprobs(reference, _fp32_head(head), targets, 1.0)
    (grad_slow,) = torch.autograd.grad(slow.sum(), reference)
    assert (fast - slow).abs().max() < 1e-2 and (fast - slow).abs().mean() < 1e-3
    assert torch.nn.functional.cosine_similarity(grad_fast.float().flatten(), grad_slow.flatten(), dim=0) > 0.999


def _fp32_head(head):
    copy = torch.nn.Linear(head.in_features, head.out_features, bias=False, device=head.weight.device)
    with torch.no_grad():
        copy.weight.copy_(head.weight.float())
    return copy.requires_grad_(False)
