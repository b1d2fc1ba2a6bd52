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


TRAINED = {"plain_text": True, "min_words": 8, "max_words": 12}


def closing_lines(tmp_path, **overrides) -> list[str]:
    config = tiny_config(tmp_path, **overrides)
    (tmp_path / "weights" / "step_2").mkdir(parents=True)
    rows = [{"step": 2, "reward_mean": 0.5, "effective_batch_size": 4}]
    run = SimpleNamespace(metrics=SimpleNamespace(rows=rows), config=config, orchestrator=None)
    console = Console(record=True, width=1000)
    assert summarize(console, run, tmp_path) == 0
    return console.export_text().splitlines()


def test_the_evaluate_command_builds_the_environment_as_the_run_trained_it(tmp_path):
    """Issue 54: the printed eval passes the run's env args (reverse-text-cpu: plain_text, 8-12 words);
    pasted as printed (against a scripted server in the role of `prime serve --lora`), it evaluates the
    environment with them."""
    import json

    from tests.cli.conftest import metadata, run_dirs
    from tests.support.cli import run_shell
    from tests.support.scripted_server import ScriptedOpenAIServer

    lines = closing_lines(tmp_path / "out", **{"orchestrator.env": [{"id": "reverse-text", "args": TRAINED}]})
    line = next(line for line in lines if line.startswith("evaluate it:"))
    command = line.split("   then   ")[1]
    assert command.startswith("prime eval run reverse-text -m trained -b http://127.0.0.1:8001/v1 -a ")
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedOpenAIServer(models=["trained"]) as server:
        pasted = command.replace("http://127.0.0.1:8001/v1", server.url)
        result = run_shell(f"{pasted} -n 2 -r 1 -s", work)
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(work)
    assert metadata(run_dir)["env_args"] == TRAINED
    assert json.dumps(TRAINED) in line


def test_the_sweep_command_is_printed_for_a_built_in_model(tmp_path):
    lines = closing_lines(tmp_path, **{"orchestrator.env": [{"id": "reverse-text", "args": TRAINED}]})
    sweep = next(line for line in lines if "--weights-dir" in line)
    assert f"prime eval run reverse-text -m local --weights-dir {tmp_path / 'weights'}" in sweep
    assert "-a " not in sweep  # the sweep reads the run's env args from its config.json


def test_a_run_without_env_args_prints_no_a(tmp_path):
    lines = closing_lines(tmp_path)
    line = next(line for line in lines if line.startswith("evaluate it:"))
    assert line.endswith("prime eval run reverse-text -m trained -b http://127.0.0.1:8001/v1")
