"""The plugin's readers of run files keep prime's one torn-line rule (issue 56): a torn last line is left
out, any other bad line is an error naming file:line (the live view and the resume rewind dropped it
silently; a batch's raised a bare JSONDecodeError)."""

from __future__ import annotations

import json

import pytest
from run_folders import write_run

from prime_cli.train.plugin_api import JsonLinesError, read_json_lines
from prime_lora import run_dir
from prime_lora.progress import MetricsTail


def test_the_live_view_names_a_bad_line_and_counts_lines_across_reads(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n\n')
    tail = MetricsTail(path)
    assert tail.poll() == [{"step": 1}]
    with open(path, "a") as handle:
        handle.write('{"step": 2}\n{"step": 3, "rew\n{"step": 4}\n')
    with pytest.raises(JsonLinesError, match=r"metrics\.jsonl:4: "):
        tail.poll()


def test_a_resume_refuses_a_bad_middle_line_before_changing_anything(tmp_path):
    out = tmp_path / "out"
    cfg = write_run(out, 3, checkpoints=(2,))
    lines = (out / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join([lines[0], '{"step": 2, "rew', *lines[1:]]) + "\n")
    with pytest.raises(run_dir.RunDirError, match=r"metrics\.jsonl:2: "):
        run_dir.prepare(cfg, out, 2)
    assert run_dir.steps_in(out / "weights") == [0, 1, 2, 3] and run_dir.steps_in(out / "rollouts") == [1, 2, 3]
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 4, "rew')  # torn: left out
    run_dir.prepare(cfg, out, 2).lock.release()
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_a_batch_names_a_bad_line_and_leaves_out_a_torn_last_one(tmp_path):
    pytest.importorskip("torch")
    from prime_lora.trainer.batches import read_batch

    path = tmp_path / "batch.jsonl"
    sample = {"input_ids": [1, 2], "loss_mask": [0, 1], "inference_logprobs": [0.0, -0.5], "advantage": 1.0}
    path.write_text(json.dumps(sample) + "\n[1]\n" + json.dumps(sample) + "\n")
    with pytest.raises(JsonLinesError, match=r"batch\.jsonl:2: "):
        read_batch(path)
    path.write_text(json.dumps(sample) + "\n" + json.dumps(sample)[:10])
    assert read_batch(path) == [sample]


def test_the_trainer_repairs_a_torn_last_metrics_line_before_it_appends(tmp_path):
    """A run killed mid-write, then resumed: the torn row goes, the next row is a line of its own."""
    pytest.importorskip("torch")
    from lora_tiny import tiny_config

    from prime_lora.trainer.loop import MetricsLog

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "lo')
    log = MetricsLog(tmp_path, tiny_config(tmp_path))
    log.write({"step": 2, "loss": 0.25})
    log.write({"step": 3, "loss": 0.125})
    log.close()
    assert [(row["step"], row["loss"]) for row in read_json_lines(path)] == [(1, 0.5), (2, 0.25), (3, 0.125)]
    assert path.read_text().endswith("\n")


def test_a_trainer_that_logged_nothing_leaves_no_metrics_file(tmp_path):
    """metrics.jsonl appears with the first trained step (a fresh start reads its presence as "trained")."""
    pytest.importorskip("torch")
    from lora_tiny import tiny_config

    from prime_lora.trainer.loop import MetricsLog

    MetricsLog(tmp_path, tiny_config(tmp_path)).close()
    assert not (tmp_path / "metrics.jsonl").exists()


def test_the_orchestrator_repairs_a_torn_last_eval_line_before_it_appends(tmp_path, monkeypatch):
    import asyncio
    from types import SimpleNamespace

    from prime_cli.train.config import RLConfig
    from prime_lora.orchestrator import online_eval

    async def evaluate_policy(*args, **kwargs):
        return SimpleNamespace(reward_mean=0.5, reward_std=0.0, num_rollouts=2, error_rate=0.0,
                               status="completed", run_dir=tmp_path)

    monkeypatch.setattr(online_eval, "evaluate_policy", evaluate_policy)
    config = RLConfig.model_validate({"max_steps": 2, "orchestrator": {
        "batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "tiny"}], "eval": {"interval": 1}}})
    evals = online_eval.OnlineEval(config, tmp_path, "http://127.0.0.1:1/v1", None,
                                   envs=[online_eval.EvalEnv("tiny", "tiny", {}, None, 1, 2)])
    path = tmp_path / "evals.jsonl"
    path.write_text('{"step": 0, "policy_step": 0}\n{"step": 1, "pol')
    asyncio.run(evals.evaluate(1, 1))
    assert [(row["step"], row["eval/tiny/reward/mean"] if row["step"] else None) for row in read_json_lines(path)] \
        == [(0, None), (1, 0.5)]


def test_the_trainer_ends_with_one_error_line_on_a_damaged_evals_line(tmp_path, monkeypatch, capsys):
    """Its last log line is what the launcher shows as the cause (progress.error_line), not a traceback."""
    pytest.importorskip("torch")
    from lora_tiny import tiny_config

    from prime_lora.trainer import __main__ as trainer_main
    from prime_lora.trainer.distributed import Dist
    from prime_lora.trainer.loop import MetricsLog

    (tmp_path / "evals.jsonl").write_text('{"step": 0}\n{"step": 1, "pol\n{"step": 2}\n')
    config_path = tmp_path / "config.json"
    config_path.write_text(tiny_config(tmp_path).model_dump_json())
    monkeypatch.setattr(trainer_main, "apply_trainer_cpus", lambda: None)
    monkeypatch.setattr(trainer_main, "training_weights", lambda name: None)
    monkeypatch.setattr(trainer_main, "init_distributed", lambda fsdp: Dist())
    monkeypatch.setattr(trainer_main, "train", lambda config, out, *args: MetricsLog(out, config))
    assert trainer_main.main(["--config", str(config_path), "--model-path", "m"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "evals.jsonl:2: not valid JSON" in line
