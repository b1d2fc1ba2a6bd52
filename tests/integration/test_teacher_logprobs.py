"""The distillation teacher's log-probs (vLLM prompt_logprobs of the whole sequence) are the server's own
sampling log-probs of the same tokens: the teacher KL of a policy against itself is zero."""

from __future__ import annotations

import asyncio
import json
import urllib.request

PROMPTS = ["Name three colours of the rainbow.", "Reverse this sentence: the quick brown fox jumps.",
           "What is 12 + 30? Answer briefly."]


def _sample(url: str, prompt: str) -> dict:
    body = {"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": prompt}], "max_tokens": 40,
            "temperature": 1.0, "logprobs": True, "return_token_ids": True, "seed": 11}
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    reply = json.loads(urllib.request.urlopen(request, timeout=300).read())
    choice = reply["choices"][0]
    prompt_ids, completion_ids = reply["prompt_token_ids"], choice["token_ids"]
    logprobs = [item["logprob"] for item in choice["logprobs"]["content"]]
    assert len(logprobs) == len(completion_ids) > 3
    return {"input_ids": prompt_ids + completion_ids, "loss_mask": [0] * len(prompt_ids) + [1] * len(completion_ids),
            "inference_logprobs": [0.0] * len(prompt_ids) + logprobs}


def test_teacher_logprobs_of_the_base_model_equal_its_sampling_logprobs(local_server):
    from prime_lora.orchestrator.teacher import TeacherClient, TeacherEndpoint, teacher_kl

    samples = [_sample(local_server.url, prompt) for prompt in PROMPTS]

    async def score():
        client = TeacherClient(TeacherEndpoint(local_server.url, "SmolLM2-135M-Instruct"))
        try:
            return [await client.score(sample) for sample in samples]
        finally:
            await client.aclose()

    scored = asyncio.run(score())
    differences = [abs(s["teacher_logprobs"][i] - s["inference_logprobs"][i])
                   for s in scored for i, m in enumerate(s["loss_mask"]) if m]
    assert len(differences) == sum(sum(s["loss_mask"]) for s in samples)
    assert max(differences) < 1e-4, f"max |teacher - sampling| = {max(differences):.2e}"
    assert all(s["teacher_logprobs"][i] == 0.0 for s in scored for i, m in enumerate(s["loss_mask"]) if not m)
    assert abs(teacher_kl(scored)) < 1e-4
