"""`[model] adapter = PATH`: an adapter that does not fit the run's LoRA is refused in one line (torch-free)."""

from __future__ import annotations

import json

import pytest

from prime_cli.train.config import DEFAULT_TARGET_MODULES, RLConfig
from prime_cli.train.plugin_api import check_initial_adapter


def config(adapter, **lora):
    return RLConfig.model_validate({
        "model": {"adapter": str(adapter)}, "trainer": {"model": {"lora": {"rank": 8, "alpha": 16, **lora}}},
        "orchestrator": {"batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "reverse-text"}]}})


def write_adapter(folder, **changes):
    """An adapter folder as peft saves one for the embedded (dense) model at rank 8, alpha 16."""
    folder.mkdir(parents=True, exist_ok=True)
    saved = {"peft_type": "LORA", "r": 8, "lora_alpha": 16.0, "target_modules": list(reversed(DEFAULT_TARGET_MODULES)),
             "target_parameters": None, "rank_pattern": {}, "alpha_pattern": {}, "bias": "none",
             "use_dora": False, "modules_to_save": None, **changes}
    (folder / "adapter_config.json").write_text(json.dumps(saved))
    (folder / "adapter_model.safetensors").write_bytes(b"")
    return folder


def test_a_matching_adapter_passes_and_none_is_fine(tmp_path):
    assert check_initial_adapter(config(write_adapter(tmp_path / "a"))) is None  # the order of modules is no matter
    unset = config("x")
    unset.model.adapter = None
    assert check_initial_adapter(unset) is None


@pytest.mark.parametrize(("changes", "lora", "expected"), [
    ({"r": 16}, {}, "has LoRA rank 16 but trainer.model.lora.rank is 8: set trainer.model.lora.rank = 16 to match"),
    ({"lora_alpha": 32.0}, {}, "has lora_alpha 32.0 but trainer.model.lora.alpha is 16: set trainer.model.lora.alpha"),
    ({"target_modules": ["q_proj", "v_proj"]}, {}, 'adapts q_proj, v_proj but trainer.model.lora.target_modules '
                                                   'adapts down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, '
                                                   'v_proj: set trainer.model.lora.target_modules = ["q_proj", "v_proj"]'),
    ({}, {"target_modules": ["q_proj", "k_proj"]}, "adapts down_proj, gate_proj"),
    ({"target_modules": "all-linear"}, {}, "names its target modules as the pattern 'all-linear', not a list"),
    ({"use_dora": True}, {}, "has use_dora = True, which this trainer's LoRA does not have"),
    ({"modules_to_save": ["lm_head"]}, {}, "has modules_to_save = ['lm_head']"),
    ({"use_rslora": True}, {}, "has use_rslora = True"),
    ({"layers_to_transform": [0]}, {}, "has layers_to_transform = [0]"),
    ({"fan_in_fan_out": True}, {}, "has fan_in_fan_out = True"),
    ({"peft_type": "IA3"}, {}, "is a IA3 adapter, not LoRA"),
    ({"rank_pattern": {"q_proj": 4}}, {}, "has rank_pattern {'q_proj': 4.0} but this run's LoRA has rank_pattern {}"),
])
def test_a_mismatch_is_refused_in_one_line_naming_both_values_and_the_fix(tmp_path, changes, lora, expected):
    line = check_initial_adapter(config(write_adapter(tmp_path / "a", **changes), **lora))
    assert line is not None and "\n" not in line and line.startswith(f"model.adapter {tmp_path / 'a'}")
    assert expected in line


def test_a_missing_or_incomplete_folder_is_refused(tmp_path):
    assert "does not exist" in check_initial_adapter(config(tmp_path / "nothing"))
    (tmp_path / "file").write_text("x")
    assert "is a file" in check_initial_adapter(config(tmp_path / "file"))
    (tmp_path / "empty").mkdir()
    assert "is not a PEFT adapter folder (no adapter_config.json)" in check_initial_adapter(config(tmp_path / "empty"))
    binary = write_adapter(tmp_path / "bin")
    (binary / "adapter_model.safetensors").rename(binary / "adapter_model.bin")
    assert "has no adapter_model.safetensors" in check_initial_adapter(config(binary))


def test_a_relative_path_is_read_from_the_base_given(tmp_path):
    write_adapter(tmp_path / "runs" / "sft")
    assert check_initial_adapter(config("runs/sft"), base=tmp_path) is None


def test_a_fused_moe_adapter_needs_vllms_copy(tmp_path):
    folder = write_adapter(tmp_path / "moe", target_parameters=["mlp.experts.gate_up_proj"])
    assert "vllm/" in check_initial_adapter(config(folder))
