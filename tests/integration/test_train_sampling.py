"""vLLM started as `prime train` starts it samples from the distribution the trainer scores.

A model folder whose generation_config.json sets top_k=3 and repetition_penalty=1.5 (as Qwen3 sets
top_k=20): if vLLM took those as its sampling defaults, its processed log-probs would be of a
truncated, penalised distribution while the trainer computes log_softmax(logits / temperature).
Checked for a request that sends only the temperature (the server's own defaults decide) and for the
orchestrator's request (orchestrator/loop.py sampling_args); and, with top_p / top_k / min_p /
repetition_penalty set in the config, that the trainer's transformed log-probs are vLLM's.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

PROMPTS = ["Reverse this sentence: the quick brown fox jumps.", "What is 12 + 30? Answer briefly.",
           "Name three colours of the rainbow."]
SERVED = "tuned"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    from prime_cli.serve.embedded import ensure_embedded_model
    from prime_cli.train.config import RLConfig
    from prime_lora.inference import InferenceServer, inference_options

    source = ensure_embedded_model()
    folder = tmp_path_factory.mktemp("model") / "tuned"
    folder.mkdir()
    for item in source.iterdir():
        if item.name != "generation_config.json":
            (folder / item.name).symlink_to(item)
    generation = json.loads((source / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**generation, "top_k": 3, "repetition_penalty": 1.5}))
    config = RLConfig.model_validate({"orchestrator": {"batch_size": 8, "env": [{"id": "reverse-text"}]},
                                      "inference": {"model": {"max_model_len": 1024}}, "seq_len": 1024})
    log = tmp_path_factory.mktemp("logs") / "inference.log"
    server = InferenceServer(inference_options(config, str(folder), SERVED), log, [])
    server.start()
    try:
        server.wait_ready()
        yield server.options.url, folder, config
    finally:
        server.stop(grace_s=10.0)


def _sample(url: str, prompt: str, sampling: dict) -> dict:
    body = {"model": SERVED, "messages": [{"role": "user", "content": prompt}], "max_tokens": 40,
            "logprobs": True, "return_token_ids": True, "seed": 7, **sampling}
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=300).read())


def _trainer_minus_vllm(url: str, folder, config, sampling: dict, transform=None) -> torch.Tensor:
    """|trainer log-prob - vLLM's processed log-prob| for every completion token of PROMPTS sampled with
    `sampling`; the trainer scores them under `transform` (default: the temperature alone)."""
    from prime_lora.trainer.batches import micro_batches
    from prime_lora.trainer.logprobs import token_logprobs
    from prime_lora.trainer.model import build_policy

    samples = []
    for prompt in PROMPTS:
        reply = _sample(url, prompt, sampling)
        choice = reply["choices"][0]
        prompt_ids, completion_ids = reply["prompt_token_ids"], choice["token_ids"]
        logprobs = [item["logprob"] for item in choice["logprobs"]["content"]]
        assert len(logprobs) == len(completion_ids) > 3
        samples.append({"input_ids": prompt_ids + completion_ids,
                        "loss_mask": [0] * len(prompt_ids) + [1] * len(completion_ids),
                        "inference_logprobs": [0.0] * len(prompt_ids) + logprobs, "advantage": 0.0})
    model = build_policy(config, str(folder), torch.device("cpu"), torch.float32).eval()
    (batch,) = micro_batches(samples, len(samples), 0, torch.device("cpu"))
    with torch.no_grad():
        trainer_logprobs, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.loss_mask,
                                             temperature=config.orchestrator.sampling.temperature,
                                             sampling=transform)
    difference = (trainer_logprobs - batch.inference_logprobs).abs()
    assert difference.numel() == sum(len(s["input_ids"]) - s["loss_mask"].index(1) for s in samples)
    return difference


@pytest.mark.parametrize("request_shape", ["temperature only", "orchestrator"])
def test_vllm_logprobs_are_the_trainers_despite_the_models_generation_config(tuned, request_shape):
    from prime_lora.orchestrator.loop import sampling_args

    url, folder, config = tuned
    sampling = {"temperature": 1.0} if request_shape == "temperature only" else sampling_args(config)
    difference = _trainer_minus_vllm(url, folder, config, sampling)
    assert float(difference.max()) < 1e-3, f"max |logp_trainer - logp_vllm| = {float(difference.max()):.2e}"


def test_the_trainer_applies_the_samplers_truncation_and_penalty(tuned):
    """top_p / top_k / min_p / repetition_penalty set in the config: the orchestrator's request carries
    them, and the trainer's log-probs of the sampled tokens are vLLM's processed log-probs."""
    from prime_lora.orchestrator.loop import sampling_args
    from prime_lora.trainer.sampling import SamplingTransform

    url, folder, config = tuned
    config = config.model_copy(deep=True)
    config.orchestrator.sampling = type(config.orchestrator.sampling)(
        temperature=1.3, top_p=0.8, top_k=12, min_p=0.02, repetition_penalty=1.4)
    transform = SamplingTransform.from_config(config.orchestrator.sampling)
    difference = _trainer_minus_vllm(url, folder, config, sampling_args(config), transform)
    assert float(difference.max()) < 1e-3, f"max |logp_trainer - logp_vllm| = {float(difference.max()):.2e}"
    # the same tokens scored under the plain softmax differ: the transformation is what made them agree
    plain = _trainer_minus_vllm(url, folder, config, sampling_args(config))
    assert float(plain.max()) > 1e-2
