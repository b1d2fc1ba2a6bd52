"""An MoE adapter as peft saves it reaches vLLM's LoRA loader with every expert's weights and scaling.

The adapter of a tiny Mixtral / Qwen3-MoE (fused `target_parameters` experts, gate_up at rank 2r and
alpha 2a) goes through `write_vllm_moe_adapter`, then vLLM's own loader (`LoRAModel.from_local_checkpoint`
with the model class's name mapper, as vLLM's worker calls it). Each expert's gate/up/down delta
B·A·scaling, as vLLM folds the scaling in, must equal peft's own delta for that expert.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("vllm.lora.lora_model")

from prime_lora.moe_adapter import vllm_adapter_dir, write_vllm_moe_adapter  # noqa: E402

EXPERTS, HIDDEN, INTER, LAYERS, R, ALPHA = 4, 32, 24, 2, 2, 6
# architecture -> (vLLM model class module, vLLM class, vLLM expert block, (gate, up, down) names)
ARCHS = {
    "mixtral": ("vllm.model_executor.models.mixtral", "MixtralForCausalLM", "block_sparse_moe", ("w1", "w3", "w2")),
    "qwen3_moe": ("vllm.model_executor.models.qwen3_moe", "Qwen3MoeForCausalLM", "mlp",
                  ("gate_proj", "up_proj", "down_proj")),
}


def tiny_moe(arch: str):
    from transformers import AutoModelForCausalLM, MixtralConfig, Qwen3MoeConfig

    common = dict(vocab_size=96, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=128, num_experts_per_tok=2)
    if arch == "mixtral":
        config = MixtralConfig(**common, intermediate_size=INTER, num_local_experts=EXPERTS)
    else:
        config = Qwen3MoeConfig(**common, moe_intermediate_size=INTER, num_experts=EXPERTS)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def peft_moe_adapter(model, seed: int = 1):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=R, lora_alpha=ALPHA, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"],
                        rank_pattern={"mlp.experts.gate_up_proj": 2 * R},
                        alpha_pattern={"mlp.experts.gate_up_proj": 2 * ALPHA})
    peft_model = get_peft_model(model, config)
    g = torch.Generator().manual_seed(seed)
    for name, param in peft_model.named_parameters():
        if "lora_" in name:  # lora_B non-zero, or the adapter would be a no-op
            param.data = torch.randn(param.shape, generator=g) * 0.1
    return peft_model


def vllm_load(arch: str, folder):
    import importlib

    from vllm.lora.lora_model import LoRAModel
    from vllm.lora.peft_helper import PEFTHelper

    module, cls_name, _, (gate, up, down) = ARCHS[arch]
    model_cls = getattr(importlib.import_module(module), cls_name)
    expected = {"q_proj", "k_proj", "v_proj", "o_proj", "experts",
                *(f"experts.{e}.{p}" for e in range(EXPERTS) for p in (gate, up, down))}
    helper = PEFTHelper.from_local_dir(str(folder), 128)
    return LoRAModel.from_local_checkpoint(str(folder), expected, helper, lora_model_id=1, device="cpu",
                                           dtype=torch.float32,
                                           weights_mapper=model_cls.hf_to_vllm_mapper.get_rename_mapper())


def vllm_delta(lora) -> torch.Tensor:
    lora.optimize()  # what vLLM does before copying an adapter in: scaling folded into lora_b
    return lora.lora_b @ lora.lora_a


@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_expert_arrives_with_peft_values(tmp_path, arch):
    peft_model = peft_moe_adapter(tiny_moe(arch))
    peft_model.save_pretrained(tmp_path / "adapter")
    assert write_vllm_moe_adapter(tmp_path / "adapter", EXPERTS) == tmp_path / "adapter" / "vllm"

    loaded = vllm_load(arch, vllm_adapter_dir(tmp_path / "adapter"))
    _, _, block, (gate, up, down) = ARCHS[arch]
    with torch.no_grad():
        for layer in range(LAYERS):
            experts = peft_model.base_model.model.model.layers[layer].mlp.experts
            gate_up_delta = experts.base_layer.get_delta_weight("default")  # (E, 2I, H)
            down_delta = experts.get_delta_weight("default")  # (E, H, I)
            assert gate_up_delta.shape == (EXPERTS, 2 * INTER, HIDDEN) and down_delta.shape == (EXPERTS, HIDDEN, INTER)
            for e in range(EXPERTS):
                name = f"model.layers.{layer}.{block}.experts.{e}"
                for proj, want in ((gate, gate_up_delta[e, :INTER]), (up, gate_up_delta[e, INTER:]),
                                   (down, down_delta[e])):
                    lora = loaded.get_lora(f"{name}.{proj}")
                    assert lora is not None, f"{name}.{proj} did not reach vLLM"
                    assert torch.allclose(vllm_delta(lora), want, atol=1e-6), f"{name}.{proj}"
            attention = peft_model.base_model.model.model.layers[layer].self_attn.q_proj
            q = loaded.get_lora(f"model.layers.{layer}.self_attn.q_proj")
            assert torch.allclose(vllm_delta(q), attention.get_delta_weight("default"), atol=1e-6)
    assert gate_up_delta.abs().max() > 1e-3  # not a no-op adapter


@pytest.mark.parametrize("arch", list(ARCHS))
def test_peft_layout_alone_gives_vllm_no_expert_adapters(tmp_path, arch):
    """Why the converter exists: vLLM's 2D MoE wrapper (Mixtral, Qwen3-MoE) needs per-expert adapters."""
    peft_moe_adapter(tiny_moe(arch)).save_pretrained(tmp_path / "adapter")
    loaded = vllm_load(arch, tmp_path / "adapter")
    assert not any(".experts.0." in name for name in loaded.loras)


def test_adapter_without_experts_is_left_alone(tmp_path):
    from peft import LoraConfig, get_peft_model

    get_peft_model(tiny_moe("mixtral"), LoraConfig(r=R, target_modules=["q_proj"])).save_pretrained(tmp_path)
    assert write_vllm_moe_adapter(tmp_path, EXPERTS) is None
    assert vllm_adapter_dir(tmp_path) == tmp_path
