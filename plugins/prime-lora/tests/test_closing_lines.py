"""The closing lines of a training run: the command that evaluates the adapter serves the run's own model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from lora_tiny import tiny_config  # noqa: E402
from rich.console import Console

from prime_lora.progress import summarize  # noqa: E402


@pytest.mark.parametrize(("model", "serve"), [("local", "prime serve --lora"),
                                               ("local-moe", "prime serve local-moe --lora"),
                                               ("Qwen/Qwen3-30B-A3B", "prime serve Qwen/Qwen3-30B-A3B --lora")])
def test_the_evaluate_command_serves_the_model_the_adapter_was_trained_on(tmp_path, model, serve):
    config = tiny_config(tmp_path, **{"model.name": model})
    (tmp_path / "weights" / "step_3").mkdir(parents=True)
    rows = [{"step": 3, "reward_mean": 0.5, "effective_batch_size": 4}]
    run = SimpleNamespace(metrics=SimpleNamespace(rows=rows), config=config, orchestrator=None)
    console = Console(record=True, width=400)
    assert summarize(console, run, tmp_path) == 0
    line = next(line for line in console.export_text().splitlines() if line.startswith("evaluate it:"))
    assert f"evaluate it: {serve} trained={tmp_path / 'weights' / 'step_3'} --port 8001" in line
