"""A training run's output directory through `TrainingRunLayout`: the orchestrator writes a step where
the trainer waits for it, and a directory written by the previous (hand-spelled) writers still resumes."""

from __future__ import annotations

import json

from run_folders import write_run

from prime_cli.train.plan import OUTPUT_LAYOUT
from prime_cli.train.plugin_api import TrainingRunLayout, read_manifest
from prime_lora import run_dir
from prime_lora.orchestrator import loop as orchestrator
from prime_lora.trainer.batch_source import FileBatches


def test_the_trainer_reads_the_batch_and_stats_where_the_orchestrator_writes_them(tmp_path):
    layout = TrainingRunLayout(tmp_path)
    sample = {"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "inference_logprobs": [0.0, -0.5, -0.1],
              "advantage": 0.25, "reward": 1.0, "env": "reverse-text", "example_id": 4, "policy_step": 0}
    orchestrator.write_batch(layout.rollouts_dir(3), [sample], {"step": 3, "reward_mean": 1.0})
    batch = FileBatches(tmp_path).next_batch(3)
    assert batch.samples == [sample] and batch.stats == {"step": 3, "reward_mean": 1.0} and batch.waited_s >= 0
    assert layout.batch_path(3) == tmp_path / "rollouts" / "step_3" / "batch.jsonl"
    assert orchestrator.checkpoint_path(tmp_path, 3) == tmp_path / "checkpoints" / "step_3" / "orchestrator.json"
    assert layout.steps(layout.ROLLOUTS) == [3]
    # the --dry-run plan names the same folders
    assert [name for name, _ in OUTPUT_LAYOUT] == ["config.json", "weights/step_N/", "checkpoints/step_N/",
                                                   "rollouts/step_N/", "logs/", "metrics.jsonl",
                                                   "prime-train.json", "train.lock"]


def test_a_directory_written_by_the_previous_writers_resumes(tmp_path):
    """As the earlier orchestrator left it after a kill: compact JSON without a newline, a hidden
    temporary batch of the step it was writing, and a step folder name that is not a step."""
    out = tmp_path
    config = write_run(out, 2, checkpoints=(1, 2), manifest=False)  # written before manifests existed
    for step in (1, 2):
        folder = out / "rollouts" / f"step_{step}"
        (folder / "stats.json").write_text(json.dumps({"step": step}))
        (folder / "batch.jsonl").write_text(json.dumps({"input_ids": [step], "loss_mask": [1]}) + "\n")
    (out / "rollouts" / "step_3").mkdir()
    (out / "rollouts" / "step_3" / ".batch.jsonl.tmp").write_text('{"input_ids": [3')
    (out / "checkpoints" / "step_x").mkdir()
    (out / "metrics.jsonl").write_text(json.dumps({"step": 1}) + "\n" + json.dumps({"step": 2}) + "\n")

    layout = TrainingRunLayout(out)
    assert layout.checkpoint_steps() == [1, 2] and layout.weight_steps() == [0, 1, 2]
    run_dir.prepare(config, out, 1).lock.release()
    assert layout.steps(layout.ROLLOUTS) == [1] and layout.checkpoint_steps() == [1]
    assert read_manifest(layout) is not None  # marked as prime's now
    assert [json.loads(line)["step"] for line in layout.metrics_path.read_text().splitlines()] == [1]
    batch = FileBatches(out).next_batch(1)
    assert batch.samples == [{"input_ids": [1], "loss_mask": [1]}] and batch.stats == {"step": 1}
    assert json.loads(orchestrator.checkpoint_path(out, 1).read_text())["sampler"] == {"epoch": 0}
