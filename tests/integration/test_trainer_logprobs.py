"""The trainer computes the same log-probabilities as vLLM for the tokens vLLM sampled (fp32 both).

If they differed, every importance ratio would be off before the policy even changed.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

PROMPTS = ["Reverse this sentence: the quick brown fox jumps.", "What is 12 + 30? Answer briefly.",
           "Name three colours of the rainbow."]


def _sample(url: str, prompt: str, temperature: float) -> dict:
    body = {"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": prompt}], "max_tokens": 40,
            "temperature": temperature, "logprobs": True, "return_token_ids": True, "seed": 7}
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=300).read())


def test_trainer_logprobs_equal_vllm_logprobs(local_server, tmp_path):
    from prime_cli.serve.embedded import ensure_embedded_model
    from prime_cli.train.config import RLConfig
    from prime_lora.trainer.batches import micro_batches
    from prime_lora.trainer.logprobs import token_logprobs
    from prime_lora.trainer.model import build_policy

    samples = []
    for prompt in PROMPTS:
        reply = _sample(local_server.url, prompt, temperature=1.0)
        choice = reply["choices"][0]
        prompt_ids, completion_ids = reply["prompt_token_ids"], choice["token_ids"]
        logprobs = [item["logprob"] for item in choice["logprobs"]["content"]]
        assert len(logprobs) == len(completion_ids) > 3
        samples.append({"input_ids": prompt_ids + completion_ids,
                        "loss_mask": [0] * len(prompt_ids) + [1] * len(completion_ids),
                        "inference_logprobs": [0.0] * len(prompt_ids) + logprobs, "advantage": 0.0})
    config = RLConfig.model_validate({"orchestrator": {"batch_size": 8, "env": [{"id": "reverse-text"}]}})
    # the policy at step 0: base model + a fresh LoRA adapter (B = 0), as the trainer starts
    model = build_policy(config, str(ensure_embedded_model()), torch.device("cpu"), torch.float32).eval()
    (batch,) = micro_batches(samples, len(samples), 0, torch.device("cpu"))
    with torch.no_grad():
        trainer_logprobs, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.loss_mask)
    difference = (trainer_logprobs - batch.inference_logprobs).abs()
    assert difference.numel() == sum(len(s["input_ids"]) - s["loss_mask"].index(1) for s in samples)
    assert float(difference.max()) < 1e-3, f"max |logp_trainer - logp_vllm| = {float(difference.max()):.2e}"
