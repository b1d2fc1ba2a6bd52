"""Config keys with an effect on the trainer, checked on a tiny model on the CPU: ac.freq, the dtypes,
FSDP's mixed precision and offload (the policy built, no GPU needed), checkpoint and weights keeping, and
the merged model (at checkpoint steps only, without copying the training model)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

from prime_lora.trainer import checkpoint  # noqa: E402
from prime_lora.trainer.fsdp import plain_name, shard_options  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402
from prime_lora.trainer.model import build_policy  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    import json

    folder = tmp_path_factory.mktemp("tiny4")
    tiny_model(folder)
    config = json.loads((folder / "config.json").read_text())
    if config["num_hidden_layers"] != 4:  # four layers, so that every 2nd and every 3rd layer differ
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig(**{**config, "num_hidden_layers": 4})).save_pretrained(folder)
    return str(folder)


def _wrapped_layers(model) -> int:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    return sum(isinstance(m, CheckpointWrapper) for m in model.modules())


@pytest.mark.parametrize(("freq", "wrapped"), [(1, 4), (2, 2), (3, 2), (4, 1)])
def test_ac_freq_checkpoints_every_nth_decoder_layer(model_path, tmp_path, freq, wrapped):
    config = tiny_config(tmp_path, **{"trainer.model.ac": {"freq": freq}})
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
    assert _wrapped_layers(model) == wrapped
    no_ac = build_policy(tiny_config(tmp_path), model_path, torch.device("cpu"), torch.float32)
    assert _wrapped_layers(no_ac) == 0


def test_ac_keeps_the_gradient(model_path, tmp_path):
    ids = torch.tensor([[5, 9, 13, 2, 7, 31]])
    grads = []
    for ac in (None, {"freq": 2}):
        extra = {"trainer.model.ac": ac} if ac else {}
        model = build_policy(tiny_config(tmp_path, **extra), model_path, torch.device("cpu"), torch.float32)
        with torch.no_grad():  # lora_B starts at zero: give it values so that lora_A gets a gradient
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.fill_(0.01)
        model.train()
        model(input_ids=ids).logits.float().pow(2).mean().backward()
        grads.append({plain_name(n): p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    assert grads[0].keys() == grads[1].keys()
    assert all(torch.allclose(grads[0][k], grads[1][k], atol=1e-6) for k in grads[0])


def test_an_ac_run_saves_adapters_and_resumes_under_plain_names(model_path, tmp_path):
    from safetensors.torch import load_file

    out = tmp_path / "ac"
    for step in (1, 2):
        write_batch(out, step, make_samples(step))
    config = tiny_config(out, max_steps=1, **{"trainer.model.ac": {"freq": 2}})
    assert train(config, out, model_path, None) == 0
    saved = load_file(out / "weights" / "step_1" / "adapter_model.safetensors")
    assert saved and not any("checkpoint" in key for key in saved)
    plain = load_file(out / "weights" / "step_0" / "adapter_model.safetensors")
    assert saved.keys() == plain.keys()
    resumed = tiny_config(out, max_steps=2, **{"trainer.model.ac": {"freq": 2}})
    assert train(resumed, out, model_path, 1) == 0


@pytest.mark.parametrize(("name", "dtype"), [("float32", torch.float32), ("bfloat16", torch.bfloat16)])
def test_optimization_dtype_is_the_adapter_dtype(model_path, tmp_path, name, dtype):
    config = tiny_config(tmp_path, **{"trainer.model.optimization_dtype": name})
    model = build_policy(config, model_path, torch.device("cpu"), torch.float32)
    assert {p.dtype for p in model.parameters() if p.requires_grad} == {dtype}
    assert {p.dtype for p in model.parameters() if not p.requires_grad} == {torch.float32}


def test_fsdp_policies_follow_the_config(tmp_path):
    from torch.distributed.fsdp import CPUOffloadPolicy

    default = shard_options(tiny_config(tmp_path).trainer.model, torch.bfloat16)
    assert default["mp_policy"].param_dtype == torch.bfloat16 and default["mp_policy"].reduce_dtype == torch.float32
    assert not isinstance(default["offload_policy"], CPUOffloadPolicy)
    config = tiny_config(tmp_path, **{"trainer.model.reduce_dtype": "bfloat16", "trainer.model.fsdp_cpu_offload": True})
    options = shard_options(config.trainer.model, torch.float32)
    assert options["mp_policy"].reduce_dtype == torch.bfloat16 and options["mp_policy"].param_dtype == torch.float32
    assert isinstance(options["offload_policy"], CPUOffloadPolicy)


def _steps(folder) -> list[int]:
    return sorted(int(p.name.split("_")[1]) for p in folder.glob("step_*"))


def test_weights_are_pruned_to_what_the_orchestrator_and_a_resume_need(model_path, tmp_path):
    out = tmp_path / "run"
    for step in range(1, 6):
        write_batch(out, step, make_samples(step))
    config = tiny_config(out, max_steps=5, **{"orchestrator.max_async_level": 0,
                                              "trainer.ckpt": {"interval": 2, "keep_last": 1, "keep_interval": 4}})
    assert train(config, out, model_path, None) == 0
    # checkpoints: step 4 kept by keep_interval, step 5 the newest; step 2 pruned by keep_last
    assert [s for s in _steps(out / "checkpoints") if (out / "checkpoints" / f"step_{s}" / "trainer").is_dir()] == [4, 5]
    # weights: step_0, the 2 newest (max_async_level 0 keeps at least 2), and the checkpointed step 4
    assert _steps(out / "weights") == [0, 4, 5]


def test_prune_checkpoints_keeps_the_newest_and_every_interval(tmp_path):
    for step in range(1, 11):
        (tmp_path / "checkpoints" / f"step_{step}" / "trainer").mkdir(parents=True)
    checkpoint.prune_checkpoints(tmp_path, keep_last=2, keep_interval=3)
    kept = [s for s in range(1, 11) if (tmp_path / "checkpoints" / f"step_{s}" / "trainer").is_dir()]
    assert kept == [3, 6, 9, 10]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])  # bfloat16: the training dtype on CUDA
def test_merged_model_only_at_checkpoint_steps_and_equal_to_peft_merge(model_path, tmp_path, monkeypatch, dtype):
    import copy

    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    out = tmp_path / "merged"
    for step in (1, 2, 3):
        write_batch(out, step, make_samples(step))
    config = tiny_config(out, max_steps=3, **{"trainer.save_merged": True, "orchestrator.max_async_level": 5,
                                              "trainer.ckpt": {"interval": 2}, "model.dtype": dtype})

    real_deepcopy = copy.deepcopy

    def no_copy(value, *args, **kwargs):
        if isinstance(value, torch.nn.Module):
            raise AssertionError("the training model was deep-copied")
        return real_deepcopy(value, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", no_copy)
    train(config, out, model_path, None)
    monkeypatch.undo()
    has_merged = [s for s in (1, 2, 3) if (out / "weights" / f"step_{s}" / "merged").is_dir()]
    assert has_merged == [2, 3]  # checkpoint step 2 and the last step
    folder = out / "weights" / "step_3" / "merged"
    trained = getattr(torch, dtype)  # saved in the training (base) dtype, whatever the loader's default
    assert {t.dtype for f in folder.glob("*.safetensors") for t in load_file(str(f)).values()} == {trained}
    merged = AutoModelForCausalLM.from_pretrained(folder, dtype=trained)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=trained)
    reference = PeftModel.from_pretrained(base, str(out / "weights" / "step_3")).merge_and_unload()
    ids = torch.tensor([[3, 14, 15, 9, 26]])
    with torch.no_grad():  # the same weights, both run in fp32
        assert torch.allclose(merged.float()(input_ids=ids).logits, reference.float()(input_ids=ids).logits, atol=1e-5)
