import json

import pytest

from prime_cli.serve.errors import ServeError
from prime_cli.serve.model_dir import check_model_dir


def make_model(path, config=None, weights="model.safetensors", tokenizer="tokenizer.json"):
    path.mkdir(parents=True, exist_ok=True)
    if config is not False:
        (path / "config.json").write_text(json.dumps(config or {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    if weights:
        (path / weights).write_bytes(b"\0" * 8)
    if tokenizer:
        (path / tokenizer).write_text("{}")
    return path


def test_a_complete_folder_passes(tmp_path):
    check_model_dir(make_model(tmp_path / "m"))


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is a file"),
        (lambda p: make_model(p / "m", config=False), "no config.json"),
        (lambda p: (make_model(p / "m"), (p / "m" / "config.json").write_text("{nope"))[0], "not valid JSON"),
        (lambda p: make_model(p / "m", config={"hidden_size": 3}), "no model architecture"),
        (lambda p: make_model(p / "m", weights=None), "no weights"),
        (lambda p: make_model(p / "m", tokenizer=None), "no tokenizer"),
    ],
)
def test_each_problem_is_named(tmp_path, build, expected):
    with pytest.raises(ServeError, match=expected):
        check_model_dir(build(tmp_path))


def test_lora_option_reads_the_adapter_rank_and_rejects_non_adapters(tmp_path):
    from prime_cli.serve.model_dir import parse_lora_option

    adapter = tmp_path / "step_3"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 32, "peft_type": "LORA"}))
    (adapter / "adapter_model.safetensors").write_bytes(b"x")
    assert parse_lora_option(f"trained={adapter}") == ("trained", adapter.resolve(), 32)
    with pytest.raises(ServeError, match="NAME=PATH"):
        parse_lora_option(str(adapter))
    with pytest.raises(ServeError, match="not a PEFT adapter folder"):
        parse_lora_option(f"x={tmp_path}")
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(ServeError, match="no adapter weights"):
        parse_lora_option(f"x={adapter}")


def test_a_fused_moe_adapter_without_vllms_copy_is_refused_in_one_line(tmp_path):
    """vLLM would load peft's fused expert layout and drop every expert adapter (Mixtral) or refuse it."""
    import json

    from prime_cli.serve.errors import ServeError
    from prime_cli.serve.model_dir import read_adapter

    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "target_parameters": ["gate_up_proj"]}))
    (tmp_path / "adapter_model.safetensors").write_bytes(b"x")
    with pytest.raises(ServeError, match="pass a weights/step_N folder it wrote"):
        read_adapter(tmp_path)
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "adapter_model.safetensors").write_bytes(b"x")
    assert read_adapter(tmp_path).rank == 8
