"""A checkpoints/step_N folder exists only when it can be resumed from: the orchestrator's progress goes
there only with the trainer's checkpoint of the step, and a save cut short leaves no step_N behind."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

from prime_cli.train.plugin_api import TrainingRunLayout  # noqa: E402
from prime_lora.orchestrator import loop as orchestrator  # noqa: E402
from prime_lora.trainer import checkpoint  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def write_step(out, step: int) -> None:
    """Batch N as the orchestrator leaves it: stats, its progress after the batch, the batch."""
    write_batch(out, step, make_samples(step))
    orchestrator.write_batch(TrainingRunLayout(out).rollouts_dir(step), make_samples(step), {"step": step},
                             {"step": step, "sampler": {"epoch": step}, "surplus": []})


def test_the_orchestrator_writes_nothing_under_checkpoints(tmp_path):
    write_step(tmp_path, 1)
    layout = TrainingRunLayout(tmp_path)
    assert not (tmp_path / layout.CHECKPOINTS).exists()
    assert json.loads(layout.orchestrator_progress(1).read_text())["step"] == 1


def test_only_checkpoint_steps_get_a_folder_and_it_holds_both_halves(model_path, tmp_path):
    for step in (1, 2, 3):
        write_step(tmp_path, step)
    config = tiny_config(tmp_path, max_steps=3, **{"trainer.ckpt": {"interval": 2}})
    assert train(config, tmp_path, model_path, None) == 0
    layout = TrainingRunLayout(tmp_path)
    assert layout.steps(layout.CHECKPOINTS) == layout.checkpoint_steps() == [2, 3]
    assert json.loads(layout.orchestrator_checkpoint(2).read_text())["sampler"] == {"epoch": 2}
    assert sorted(p.name for p in (tmp_path / layout.CHECKPOINTS).iterdir()) == ["step_2", "step_3"]


def test_a_save_cut_short_leaves_no_step_folder(model_path, tmp_path, monkeypatch):
    write_step(tmp_path, 1)
    config = tiny_config(tmp_path, max_steps=1)
    real_save = torch.save

    def killed_at_the_optimizer(obj, path, *args, **kwargs):
        if str(path).endswith("optimizer.pt"):
            raise KeyboardInterrupt  # the stop arrives mid-save
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "save", killed_at_the_optimizer)
    with pytest.raises(KeyboardInterrupt):
        train(config, tmp_path, model_path, None)
    layout = TrainingRunLayout(tmp_path)
    assert layout.steps(layout.CHECKPOINTS) == [] and layout.checkpoint_steps() == []
    monkeypatch.setattr(checkpoint.torch, "save", real_save)
    assert train(config, tmp_path, model_path, None) == 0  # the next save of the step replaces the leftover
    assert layout.checkpoint_steps() == [1]
    assert [p.name for p in (tmp_path / layout.CHECKPOINTS).iterdir()] == ["step_1"]
