"""The closing lines of a training run: the command that evaluates the adapter serves the run's own model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from lora_tiny import tiny_config  # noqa: E402
from rich.console import Console

from prime_lora.progress import summarize  # noqa: E402


@pytest.mark.parametrize(("model", "serve"), [("local", "prime serve --lora"),
                                               ("local-moe", "prime serve local-moe --lora"),
                                               ("FOLDER", "prime serve FOLDER --lora"),
                                               ("Qwen/Qwen3-30B-A3B", "prime serve SNAPSHOT --lora")])
def test_the_evaluate_command_serves_the_model_the_adapter_was_trained_on(tmp_path, monkeypatch, model, serve):
    """`prime serve` takes a built-in name or a folder: a hub id is served from its snapshot in the cache."""
    folder, hub = tmp_path / "my-model", tmp_path / "hub"
    folder.mkdir()
    snapshot = hub / "models--Qwen--Qwen3-30B-A3B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (hub / "models--Qwen--Qwen3-30B-A3B" / "refs").mkdir()
    (hub / "models--Qwen--Qwen3-30B-A3B" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    model, serve = model.replace("FOLDER", str(folder)), serve.replace("FOLDER", str(folder))
    serve = serve.replace("SNAPSHOT", str(snapshot))
    config = tiny_config(tmp_path, **{"model.name": model})
    (tmp_path / "weights" / "step_3").mkdir(parents=True)
    rows = [{"step": 3, "reward_mean": 0.5, "effective_batch_size": 4}]
    run = SimpleNamespace(metrics=SimpleNamespace(rows=rows), config=config, orchestrator=None)
    console = Console(record=True, width=400)
    assert summarize(console, run, tmp_path) == 0
    line = next(line for line in console.export_text().splitlines() if line.startswith("evaluate it:"))
    assert f"evaluate it: {serve} trained={tmp_path / 'weights' / 'step_3'} --port 8001" in line
