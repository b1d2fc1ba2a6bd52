"""Sparse upcycling keeps the dense model's output (tiny random Llama, no cache): the fused
gate_up_proj is gate rows then up rows, and Mixtral's checkpoint names load back."""

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from prime_cli.serve.upcycle import mixtral_config, upcycle  # noqa: E402


def tiny_llama(folder):
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # gate and up differ, so a swapped layout would change the output
        for layer in model.model.layers:
            layer.mlp.up_proj.weight.mul_(3.0)
    model.save_pretrained(folder)
    return model


def test_the_upcycled_model_computes_the_dense_output_and_routes_tokens_apart(tmp_path):
    dense = tiny_llama(tmp_path / "dense")
    upcycle(tmp_path / "dense", tmp_path / "moe", experts=4, top_k=2, seed=0, router_std=0.02)
    moe = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "moe", dtype=torch.float32).eval()
    assert type(moe).__name__ == "MixtralForCausalLM"
    assert moe.lm_head.weight.data_ptr() == moe.model.embed_tokens.weight.data_ptr()  # tied, as the dense one
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    chosen = []
    hooks = [layer.mlp.gate.register_forward_hook(lambda m, i, out: chosen.append(out[2])) for layer in moe.model.layers]
    with torch.no_grad():
        difference = (dense(ids).logits - moe(ids).logits).abs().max().item()
    for hook in hooks:
        hook.remove()
    assert difference < 1e-5
    expert_sets = {tuple(sorted(row)) for indices in chosen for row in indices.tolist()}
    assert len(expert_sets) > 1


def test_the_checkpoint_has_mixtral_names_that_vllm_loads(tmp_path):
    from safetensors import safe_open

    tiny_llama(tmp_path / "dense")
    upcycle(tmp_path / "dense", tmp_path / "moe", experts=3, top_k=2, seed=0, router_std=0.02)
    with safe_open(str(tmp_path / "moe" / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert {f"model.layers.1.block_sparse_moe.experts.2.{w}.weight" for w in ("w1", "w2", "w3")} <= names
    assert "model.layers.0.block_sparse_moe.gate.weight" in names
    config = json.loads((tmp_path / "moe" / "config.json").read_text())
    assert (config["num_local_experts"], config["num_experts_per_tok"], config["tie_word_embeddings"]) == (3, 2, True)


def test_only_bias_free_llama_models_are_upcycled():
    with pytest.raises(ValueError, match="Llama model without biases"):
        mixtral_config({"model_type": "llama", "attention_bias": True}, 4, 2)
    with pytest.raises(ValueError, match="Llama model"):
        mixtral_config({"model_type": "qwen2"}, 4, 2)
