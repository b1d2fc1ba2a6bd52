"""`local-moe` is cached like the embedded model: verified by its manifest on each use, rebuilt when
damaged or made with another recipe; and its name is accepted wherever `local` is."""

import json
from pathlib import Path

import pytest

from prime_cli.clients.command_flags import LOCAL_MODELS, model_flags
from prime_cli.serve import builtin_models, local_moe
from prime_cli.serve.embedded import MANIFEST, write_manifest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A dense model with a manifest and a fake upcycler that writes a folder and counts its builds."""
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path))
    dense = tmp_path / "dense"
    dense.mkdir()
    (dense / "model.safetensors").write_bytes(b"dense" * 10)
    write_manifest(dense, "dense", "test")
    monkeypatch.setattr(local_moe, "ensure_embedded_model", lambda status: dense)
    builds = []

    def fake_run(cmd, **kwargs):
        out = Path(cmd[4])
        (out / "config.json").write_text(json.dumps({"architectures": ["MixtralForCausalLM"]}))
        (out / "model.safetensors").write_bytes(b"experts" * 100)
        builds.append(cmd[5:])
        return type("Done", (), {"returncode": 0, "stderr": ""})()

    monkeypatch.setattr(local_moe.subprocess, "run", fake_run)
    return builds


def test_built_once_then_reused(cache):
    messages = []
    folder = local_moe.ensure_local_moe_model(messages.append)
    assert folder == local_moe.local_moe_dir() and (folder / MANIFEST).is_file()
    assert local_moe.ensure_local_moe_model() == folder
    assert cache == [[str(local_moe.NUM_EXPERTS), str(local_moe.TOP_K), str(local_moe.ROUTER_SEED),
                      str(local_moe.ROUTER_STD)]]
    assert any("upcycling" in m for m in messages)


def test_a_damaged_folder_is_rebuilt(cache):
    folder = local_moe.ensure_local_moe_model()
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[0] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    messages = []
    assert local_moe.ensure_local_moe_model(messages.append) == folder
    assert len(cache) == 2 and "does not match its checksum" in messages[0]
    assert (folder / "model.safetensors").read_bytes() == b"experts" * 100


def test_another_recipe_or_other_dense_weights_rebuild_it(cache, monkeypatch):
    local_moe.ensure_local_moe_model()
    monkeypatch.setattr(local_moe, "TOP_K", 1)
    messages = []
    local_moe.ensure_local_moe_model(messages.append)
    assert len(cache) == 2 and "other settings" in messages[0]
    manifest = json.loads((local_moe.local_moe_dir() / MANIFEST).read_text())
    assert manifest["recipe"]["top_k"] == 1 and manifest["recipe"]["dense_sha256"]


def test_a_failed_build_leaves_no_folder(cache, monkeypatch):
    monkeypatch.setattr(local_moe.subprocess, "run", lambda cmd, **kw: type(
        "Done", (), {"returncode": 1, "stderr": "Traceback\nValueError: upcycling needs a Llama model"})())
    with pytest.raises(local_moe.ServeError, match="upcycling .* failed: ValueError: upcycling needs a Llama"):
        local_moe.ensure_local_moe_model()
    assert not local_moe.local_moe_dir().exists()
    assert not [p for p in local_moe.local_moe_dir().parent.iterdir() if p.name.startswith(".")]


def test_the_built_in_names_are_the_same_in_serve_and_clients():
    assert tuple(builtin_models.BUILTIN_MODELS) == LOCAL_MODELS
    assert builtin_models.builtin_of_served(local_moe.LOCAL_MOE_NAME) == "local-moe"
    assert builtin_models.builtin_of_served("my-finetune") == "local"


def test_printed_commands_name_the_built_in_model():
    assert model_flags("SmolLM2-4x135M-Instruct", "http://127.0.0.1:9/v1", None, None, local="local-moe") == [
        "-m", "local-moe"]
    assert model_flags("SmolLM2-135M-Instruct", "http://127.0.0.1:9/v1", None, None, local=True) == ["-m", "local"]


def test_training_weights_and_the_preflight_know_local_moe(monkeypatch, tmp_path):
    from prime_cli.train import models
    from prime_cli.train.preflight import model_problem

    monkeypatch.setitem(builtin_models.BUILTIN_MODELS, "local-moe", ("SmolLM2-4x135M-Instruct", lambda s: tmp_path))
    weights = models.training_weights("local-moe")
    assert (weights.path, weights.served_name, weights.is_local_embedded) == (
        str(tmp_path), "SmolLM2-4x135M-Instruct", True)
    assert model_problem("local-moe") is None
    assert "local-moe" in model_problem("no/such-model-here-xyz")


def test_the_lora_plan_of_local_moe_adapts_its_experts_without_building_it(cache):
    from prime_cli.train.lora_targets import resolve_lora_targets
    from prime_cli.train.model_facts import model_config

    targets = resolve_lora_targets(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                                   8, 16, model_config("local-moe"))
    assert targets.parameters == ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
    assert "4 experts, 2 active" in targets.description
    assert cache == []  # nothing was upcycled for the plan
