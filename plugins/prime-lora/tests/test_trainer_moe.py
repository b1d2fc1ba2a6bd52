"""LoRA on Mixture-of-Experts models: which weights get adapters (each expert's gate/up/down, never the
router unless asked), at the configured scaling alpha/r, and a merged model equal to peft's merge."""

from __future__ import annotations

import pytest
import torch
from lora_tiny import make_samples, tiny_config, tiny_moe_model, write_batch

from prime_lora.trainer.checkpoint import merged_state_dict
from prime_lora.trainer.loop import train
from prime_lora.trainer.model import build_policy, describe_adapters

RANK, ALPHA = 4, 8


@pytest.fixture(scope="module", params=["mixtral", "qwen3_moe"])
def moe_path(request, tmp_path_factory):
    return tiny_moe_model(tmp_path_factory.mktemp(request.param), request.param)


def policy(moe_path, tmp_path, **overrides):
    config = tiny_config(tmp_path, **{"trainer.model.lora": {"rank": RANK, "alpha": ALPHA, "dropout": 0.0},
                                      **overrides})
    return build_policy(config, moe_path, torch.device("cpu"), torch.float32)


def adapted(model) -> set[str]:
    return {name.split(".lora_")[0].replace("base_model.model.model.layers.0.", "")
            for name, param in model.named_parameters() if param.requires_grad and ".layers.0." in name}


def test_every_expert_projection_and_attention_is_adapted_and_the_router_is_not(moe_path, tmp_path):
    model = policy(moe_path, tmp_path)
    # peft's nesting: mlp.experts wraps down_proj, mlp.experts.base_layer wraps gate_up_proj
    assert adapted(model) == {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                              "mlp.experts", "mlp.experts.base_layer"}
    described = describe_adapters(model)
    assert "experts.gate_up_proj x2 (4 experts, rank 8)" in described
    assert "experts.down_proj x2 (4 experts, rank 4)" in described
    assert "gate" not in described.replace("gate_up", "")


def test_the_router_is_adapted_when_asked_and_expert_names_users_know_are_accepted(moe_path, tmp_path):
    model = policy(moe_path, tmp_path, **{"trainer.model.lora.target_modules": ["q_proj", "w2", "router"]})
    assert adapted(model) == {"self_attn.q_proj", "mlp.experts", "mlp.gate"}
    assert "experts.gate_up_proj" not in describe_adapters(model)


def test_dropout_on_fused_experts_is_refused_with_the_fix(moe_path, tmp_path):
    with pytest.raises(ValueError, match="set dropout = 0"):
        policy(moe_path, tmp_path, **{"trainer.model.lora.dropout": 0.05})


def test_each_experts_merged_delta_is_b_times_a_times_alpha_over_rank(moe_path, tmp_path):
    from transformers import AutoModelForCausalLM

    model = policy(moe_path, tmp_path)
    generator = torch.Generator().manual_seed(1)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: give every adapter a real delta
            param.data = torch.randn(param.shape, generator=generator) * 0.1
    merged = merged_state_dict(model)
    base = AutoModelForCausalLM.from_pretrained(moe_path, dtype=torch.float32).state_dict()
    experts = model.base_model.model.model.layers[1].mlp.experts
    for wrapper, key, rank in ((experts.base_layer, "gate_up_proj", 2 * RANK), (experts, "down_proj", RANK)):
        a = wrapper.lora_A["default"].weight.detach()  # (experts * rank, in)
        b = wrapper.lora_B["default"].weight.detach()  # (out, rank * experts), peft's order
        a, b = a.reshape(4, rank, -1), b.reshape(b.shape[0], rank, 4)
        full = f"model.layers.1.mlp.experts.{key}"
        for expert in range(4):
            expected = b[:, :, expert] @ a[expert] * (ALPHA / RANK)  # rank 2r at alpha 2a: still alpha/r
            delta = merged[full][expert] - base[full][expert]
            assert delta.abs().max() > 1e-3
            torch.testing.assert_close(delta, expected, atol=1e-5, rtol=1e-4)


def test_training_an_moe_saves_a_merged_model_equal_to_peft_merge(moe_path, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = tmp_path / "run"
    for step in (1, 2):
        write_batch(out, step, make_samples(step))
    config = tiny_config(out, **{"trainer.save_merged": True, "trainer.model.lora.dropout": 0.0,
                                 "orchestrator.max_async_level": 5})
    train(config, out, moe_path, None)
    merged = AutoModelForCausalLM.from_pretrained(out / "weights" / "step_2" / "merged", dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(moe_path, dtype=torch.float32)
    reference = PeftModel.from_pretrained(base, str(out / "weights" / "step_2")).merge_and_unload()
    untouched = AutoModelForCausalLM.from_pretrained(moe_path, dtype=torch.float32)
    key = "model.layers.0.mlp.experts.down_proj"
    assert not torch.equal(reference.state_dict()[key], untouched.state_dict()[key])  # the experts trained
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(merged.state_dict()[name], value, atol=1e-6, rtol=1e-5, msg=name)


def step_metrics(moe_path, tmp_path, samples, router_scale: float | None, **overrides):
    from prime_lora.trainer.optim import build_optimizer, build_scheduler
    from prime_lora.trainer.step import train_step

    config = tiny_config(tmp_path, **{"trainer.model.lora": {"rank": RANK, "alpha": ALPHA, "dropout": 0.0},
                                      **overrides})
    model = build_policy(config, moe_path, torch.device("cpu"), torch.float32)
    if router_scale is not None:  # 0: every router probability equal, every token at a tie
        for layer in model.base_model.model.model.layers:
            layer.mlp.gate.weight.data.normal_(0, router_scale) if router_scale else layer.mlp.gate.weight.data.zero_()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, config)
    result = train_step(model, optimizer, build_scheduler(optimizer, config), params, samples, config,
                        torch.device("cpu"), 0)
    return result.as_metrics()


@pytest.mark.parametrize("pack", [True, False])
def test_routing_near_ties_are_counted_per_step(moe_path, tmp_path, pack):
    tied = step_metrics(moe_path, tmp_path, make_samples(3), 0.0, **{"trainer.pack": pack})
    assert tied["routing_near_tie_fraction"] == 1.0
    decided = step_metrics(moe_path, tmp_path, make_samples(3), 5.0, **{"trainer.pack": pack})
    assert decided["routing_near_tie_fraction"] < 0.2


def test_near_ties_with_a_far_off_sampler_are_masked_by_the_ratio_band_and_counted(moe_path, tmp_path):
    samples = make_samples(3)
    for sample in samples:  # the sampler's log-probs far below the trainer's: every ratio above ratio_high
        sample["inference_logprobs"] = [0.0 if m == 0 else -60.0 for m in sample["loss_mask"]]
    metrics = step_metrics(moe_path, tmp_path, samples, 0.0)
    assert metrics["routing_near_tie_masked_fraction"] == 1.0 and metrics["masked_high_fraction"] == 1.0
    assert metrics["mismatch_kl_near_tie"] > 1.0


def test_a_dense_model_reports_no_routing_metrics(tmp_path):
    from lora_tiny import tiny_model

    metrics = step_metrics(tiny_model(tmp_path / "dense"), tmp_path, make_samples(3), None)
    assert not any(key.startswith("routing_") for key in metrics)


def test_each_saved_moe_adapter_has_vllms_layout_beside_peft_and_vllm_is_handed_it(moe_path, tmp_path):
    import json

    from prime_cli.serve.model_dir import read_adapter
    from prime_lora.trainer.checkpoint import save_weights

    model = policy(moe_path, tmp_path)
    folder = save_weights(model, tmp_path / "run", 0)
    assert (folder / "adapter_model.safetensors").is_file()  # peft's own, for peft and `merge`
    vllm = folder / "vllm"
    config = json.loads((vllm / "adapter_config.json").read_text())
    assert config["target_parameters"] is None and config["r"] == RANK
    from safetensors.torch import load_file

    names = set(load_file(str(vllm / "adapter_model.safetensors")))
    per_expert = {n for n in names if ".experts.3." in n and ".layers.1." in n}
    assert len(per_expert) == 6  # gate, up and down of the last expert, A and B each
    assert read_adapter(folder).rank == 2 * RANK  # what --max-lora-rank must hold


def test_vllm_is_handed_the_per_expert_layout_where_there_is_one(tmp_path):
    from prime_cli.serve.lora_runtime import vllm_adapter_path

    assert vllm_adapter_path(tmp_path) == tmp_path
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "adapter_model.safetensors").write_bytes(b"x")
    assert vllm_adapter_path(tmp_path) == tmp_path / "vllm"


@pytest.mark.parametrize("targets", [["q_proj", "gate_proj"], ["q_proj", "down_proj"]])
def test_an_adapter_on_one_fused_expert_weight_reaches_vllm_under_that_weights_names(moe_path, tmp_path, targets):
    """With one fused weight adapted, peft's single wrapper is `experts` whichever it is: the vLLM copy
    must still name gate/up (or down) by what was adapted, not by peft's nesting."""
    import json

    from safetensors.torch import load_file

    from prime_lora.trainer.checkpoint import save_weights

    model = policy(moe_path, tmp_path, **{"trainer.model.lora.target_modules": targets})
    folder = save_weights(model, tmp_path / "run", 0)
    names = set(load_file(str(folder / "vllm" / "adapter_model.safetensors")))
    config = json.loads((folder / "vllm" / "adapter_config.json").read_text())
    gate_up = {".w1.", ".w3."} if "mixtral" in moe_path else {".gate_proj.", ".up_proj."}
    down = ".w2." if "mixtral" in moe_path else ".down_proj."
    adapted_gate_up = any(part in name for name in names for part in gate_up)
    adapted_down = any(down in name for name in names)
    assert (adapted_gate_up, adapted_down) == (targets[1] == "gate_proj", targets[1] == "down_proj")
    expected_rank = 2 * RANK if targets[1] == "gate_proj" else RANK
    assert set(config["rank_pattern"].values()) == {expected_rank}


def test_only_experts_adapts_no_attention(moe_path, tmp_path):
    model = policy(moe_path, tmp_path, **{"trainer.model.lora.target_modules": ["experts"]})
    assert adapted(model) == {"mlp.experts", "mlp.experts.base_layer"}


def test_a_routing_hook_does_not_recompile_compiled_layers(moe_path, tmp_path, capfd):
    """Traced, the hook's growing list would be a guard that recompiles each compiled layer (on a 48-layer
    model past dynamo's recompile limit, so most layers would run uncompiled)."""
    import torch._dynamo
    import torch._logging
    from lora_tiny import make_samples as samples

    from prime_lora.trainer.batches import micro_batches
    from prime_lora.trainer.logprobs import token_logprobs
    from prime_lora.trainer.model import compile_layers

    model = policy(moe_path, tmp_path)
    torch._dynamo.reset()
    torch._logging.set_logs(recompiles=True)
    try:
        compile_layers(model, backend="eager")
        (batch,) = micro_batches(samples(5), 4, 0, torch.device("cpu"))
        for _ in range(3):
            token_logprobs(model, batch.input_ids, batch.attention_mask, batch.loss_mask)
    finally:
        torch._logging.set_logs()
        torch._dynamo.reset()
    assert model.prime_router_margins.near_tie is not None
    reasons = [line for line in capfd.readouterr().err.splitlines() if "margins" in line]
    assert not reasons, reasons[:3]


@pytest.mark.parametrize(("router_scale", "diverge"), [(0.0, False), (5.0, True)])
def test_experts_adapters_diverge_exactly_when_the_router_sends_them_different_tokens(moe_path, tmp_path,
                                                                                       router_scale, diverge):
    """Every expert made a copy of the first (its weights and lora_A), as local-moe's experts start: after a
    step their lora_B differ only through the tokens routed to them. A zero router ties and sends every token
    to the same experts, which then learn the same thing."""
    from prime_lora.trainer.optim import build_optimizer, build_scheduler
    from prime_lora.trainer.step import train_step

    config = tiny_config(tmp_path, **{"trainer.model.lora": {"rank": RANK, "alpha": ALPHA, "dropout": 0.0}})
    model = build_policy(config, moe_path, torch.device("cpu"), torch.float32)
    layers = model.base_model.model.model.layers
    for layer in layers:
        if router_scale:
            layer.mlp.gate.weight.data.normal_(0, router_scale, generator=torch.Generator().manual_seed(3))
        else:
            layer.mlp.gate.weight.data.zero_()
        experts = layer.mlp.experts
        for a in (experts.lora_A["default"].weight.data, experts.base_layer.lora_A["default"].weight.data):
            a.copy_(a.reshape(4, a.shape[0] // 4, -1)[:1].expand(4, -1, -1).reshape(a.shape))  # (experts * r, in)
        base = experts.get_base_layer()
        for name in ("gate_up_proj", "down_proj"):
            weight = getattr(base, name).data
            weight.copy_(weight[:1].expand_as(weight))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, config)
    train_step(model, optimizer, build_scheduler(optimizer, config), params, make_samples(3), config,
               torch.device("cpu"), 0)
    b = layers[1].mlp.experts.lora_B["default"].weight.detach()  # (hidden, rank * experts): expert is last
    per_expert = b.reshape(b.shape[0], RANK, 4).permute(2, 0, 1)
    trained = [e for e in range(4) if per_expert[e].abs().max() > 0]
    pairs = [(i, j) for i in trained for j in trained if i < j]
    assert len(trained) >= 2 and (router_scale == 0 or len(trained) == 4)
    assert any(not torch.allclose(per_expert[i], per_expert[j]) for i, j in pairs) == diverge
