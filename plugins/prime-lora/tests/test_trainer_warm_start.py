"""`[model] adapter = PATH`: the policy starts from a saved adapter (weights/step_0 is that adapter), every tensor
of it must fit, and a resume takes its checkpoint instead."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from prime_cli.train.plugin_api import check_initial_adapter  # noqa: E402
from prime_lora.trainer.batch_source import MemoryBatches  # noqa: E402
from prime_lora.trainer.checkpoint import save_weights  # noqa: E402
from prime_lora.trainer.logprobs import token_logprobs  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402
from prime_lora.trainer.model import build_policy  # noqa: E402
from prime_lora.trainer.packing import packed_micro_batches  # noqa: E402

CPU = torch.device("cpu")
LORA = {"trainer.model.lora.dropout": 0.0, "trainer.model.lora.rank": 4, "trainer.model.lora.alpha": 8}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def trained_adapter(model_path, tmp_path):
    """An adapter a policy saved after its LoRA weights moved away from the start (B != 0)."""
    model = build_policy(tiny_config(tmp_path / "first", **LORA), model_path, CPU, torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.2, generator=torch.Generator().manual_seed(len(name)))
    return save_weights(model, tmp_path / "first", 3)


def logprobs(model):
    mb = packed_micro_batches(make_samples(1, count=4), 256, CPU)[0]
    with torch.no_grad():
        return token_logprobs(model, mb.input_ids, mb.attention_mask, mb.loss_mask, loss_index=mb.loss_index,
                              padded=False, position_ids=mb.position_ids, document_lengths=mb.document_lengths)[0]


def test_a_loaded_adapter_gives_the_saving_policys_logprobs(model_path, tmp_path, trained_adapter):
    config = tiny_config(tmp_path / "second", **LORA, **{"model.adapter": str(trained_adapter)})
    assert check_initial_adapter(config) is None
    saved = build_policy(tiny_config(tmp_path / "first", **LORA), model_path, CPU, torch.float32,
                         initial_adapter=False)
    loaded = build_policy(config, model_path, CPU, torch.float32)
    fresh = build_policy(config, model_path, CPU, torch.float32, initial_adapter=False)  # B = 0: the base model
    assert torch.equal(logprobs(saved), logprobs(fresh))
    from prime_lora.trainer.warm_start import load_initial_adapter

    load_initial_adapter(saved, trained_adapter)
    assert torch.equal(logprobs(loaded), logprobs(saved))
    assert not torch.allclose(logprobs(loaded), logprobs(fresh), atol=1e-3)


def test_step_0_of_a_warm_started_run_is_the_adapter_and_a_resume_takes_its_checkpoint(model_path, tmp_path,
                                                                                         trained_adapter, capsys):
    out = tmp_path / "run"
    config = tiny_config(out, max_steps=1, **LORA, **{"model.adapter": str(trained_adapter)})
    batches = MemoryBatches({step: make_samples(step) for step in (1, 2)})
    train(config, out, model_path, None, batches=batches)
    given, step0 = load_file(str(trained_adapter / "adapter_model.safetensors")), \
        load_file(str(out / "weights" / "step_0" / "adapter_model.safetensors"))
    assert given.keys() == step0.keys() and all(torch.equal(given[k], step0[k]) for k in given)
    assert f"starting from the adapter {trained_adapter}" in capsys.readouterr().out
    # resuming at step 1 with an adapter that no longer exists: the checkpoint holds the weights
    moved = tiny_config(out, max_steps=2, **LORA, **{"model.adapter": str(tmp_path / "gone")})
    train(moved, out, model_path, 1, batches=batches)
    assert "starting from the adapter" not in capsys.readouterr().out
    step1 = load_file(str(out / "weights" / "step_1" / "adapter_model.safetensors"))
    assert not all(torch.equal(step0[k], step1[k]) for k in step0)


def test_an_adapter_that_does_not_fit_is_refused_naming_the_keys(model_path, tmp_path, trained_adapter):
    weights = load_file(str(trained_adapter / "adapter_model.safetensors"))
    dropped = sorted(weights)[0]
    del weights[dropped]
    weights["base_model.model.model.extra.lora_A.weight"] = torch.zeros(4, 32)
    save_file(weights, str(trained_adapter / "adapter_model.safetensors"))
    config = tiny_config(tmp_path / "second", **LORA, **{"model.adapter": str(trained_adapter)})
    with pytest.raises(ValueError, match=r"1 weights missing \(e.g. \['" + dropped.replace(".", r"\.")
                       + r"'\]\), 1 unexpected \(e.g. \['base_model\.model\.model\.extra"):
        build_policy(config, model_path, CPU, torch.float32)


def test_a_rank_mismatch_is_refused_in_one_line_before_the_trainer_and_by_it(model_path, tmp_path, trained_adapter):
    config = tiny_config(tmp_path / "second", **{**LORA, "trainer.model.lora.rank": 8,
                                                 "model.adapter": str(trained_adapter)})
    line = check_initial_adapter(config)
    assert line == (f"model.adapter {trained_adapter} has LoRA rank 4 but trainer.model.lora.rank is 8: set "
                    "trainer.model.lora.rank = 4 to match the adapter")
    with pytest.raises(ValueError, match=r"28 weights have another shape than the policy.s .*: \(4, 64\) in the adapter, \(8, 64\) here"):
        build_policy(config, model_path, CPU, torch.float32)


def test_a_mixture_of_experts_adapter_loads_its_expert_weights(tmp_path):
    from lora_tiny import tiny_moe_model

    from prime_lora.trainer.warm_start import load_initial_adapter

    moe = tiny_moe_model(tmp_path / "moe")
    config = tiny_config(tmp_path / "first", **LORA)
    first = build_policy(config, moe, CPU, torch.float32)
    with torch.no_grad():
        for name, p in first.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.2, generator=torch.Generator().manual_seed(len(name)))
    folder = save_weights(first, tmp_path / "first", 1)
    assert (folder / "vllm" / "adapter_model.safetensors").is_file()  # what vLLM serves from step 0
    second = build_policy(config, moe, CPU, torch.float32)
    before = logprobs(second)
    assert load_initial_adapter(second, folder) == len(load_file(str(folder / "adapter_model.safetensors")))
    assert any("experts" in key for key in load_file(str(folder / "adapter_model.safetensors")))
    assert torch.equal(logprobs(second), logprobs(first)) and not torch.equal(before, logprobs(first))
