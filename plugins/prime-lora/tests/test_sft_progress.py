"""The launcher's lines for an SFT run: a step shows its loss and tokens (no reward), the closing lines the loss
curve, and the evaluate command an environment of the run's online evals (an SFT run on data has no other)."""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from prime_cli.train.config import RLConfig
from prime_lora.progress import step_line, summarize

SFT_ROW = {"step": 3, "samples": 8, "effective_batch_size": 8, "loss_tokens": 412, "epoch": 1.25, "sft_rows": 400,
           "bad_rows": 0, "loss": 1.2345, "nll": 1.2345, "num_tokens": 900, "grad_norm": 0.41, "lr": 1e-4,
           "step_s": 2.1, "train_s": 1.9, "tokens_per_s": 850.0}


def test_an_sft_step_line_shows_loss_tokens_and_epoch_not_reward():
    line = step_line(SFT_ROW, 30)
    assert line.startswith("step 3/30  loss 1.2345  batch 8 (412 loss tokens)  epoch 1.25  grad 0.410")
    assert "reward" not in line and "850 tok/s" in line
    assert step_line({"step": 1, "reward_mean": 0.5, "reward_std": 0.1}, 30).startswith("step 1/30  reward 0.500")


def test_the_closing_lines_of_an_sft_run_show_the_loss_and_evaluate_on_its_eval_environment(tmp_path):
    config = RLConfig.model_validate({
        "max_steps": 3, "output_dir": str(tmp_path),
        "orchestrator": {"algo": {"type": "dataset_sft", "dataset": {"source": [{"dataset": "rows.jsonl"}]}},
                         "eval": {"env": [{"id": "reverse-text"}]}}})
    (tmp_path / "weights" / "step_3").mkdir(parents=True)
    run = SimpleNamespace(metrics=SimpleNamespace(rows=[{**SFT_ROW, "loss": 2.0}, SFT_ROW]), config=config,
                          orchestrator=None)
    console = Console(record=True, width=400)
    assert summarize(console, run, tmp_path) == 0
    text = console.export_text()
    assert "2 steps this run; loss per step: 2.000 1.234" in text
    assert "prime eval run reverse-text -m trained" in text
    config.orchestrator.__dict__["eval"] = None
    console = Console(record=True, width=400)
    summarize(console, SimpleNamespace(metrics=run.metrics, config=config, orchestrator=None), tmp_path)
    assert "prime eval run ENV -m trained" in console.export_text()


def test_a_distillation_step_shows_the_teacher_kl_and_the_closing_lines_its_curve(tmp_path):
    row = {"step": 2, "reward_mean": 0.3, "reward_std": 0.1, "effective_batch_size": 16, "teacher_kl": 0.4321,
           "mismatch_kl": 1e-4, "masked_fraction": 0.0, "grad_norm": 0.5}
    line = step_line(row, 20)
    assert "teacher kl 0.4321  kl 1.00e-04" in line
    assert "teacher kl" not in step_line({k: v for k, v in row.items() if k != "teacher_kl"}, 20)
    config = RLConfig.model_validate({"max_steps": 2, "output_dir": str(tmp_path),
                                      "trainer": {"loss": {"teacher_tau": 1.0}},
                                      "orchestrator": {"env": [{"id": "reverse-text"}],
                                                       "teacher_model": {"adapter": "sft"}}})
    (tmp_path / "weights" / "step_2").mkdir(parents=True)
    run = SimpleNamespace(metrics=SimpleNamespace(rows=[{**row, "teacher_kl": 0.5}, row]), config=config,
                          orchestrator=None)
    console = Console(record=True, width=400)
    summarize(console, run, tmp_path)
    assert "reward per step: 0.300 0.300; teacher kl per step: 0.500 0.432" in console.export_text()


def test_a_teacher_rollouts_step_shows_what_was_kept():
    row = {**SFT_ROW, "reward_mean": 0.6, "teacher_kept": 8, "teacher_filtered": 24}
    del row["epoch"]
    assert "teacher reward 0.600" in step_line(row, 30) and "kept 8, filtered 24" in step_line(row, 30)


def test_without_vllm_the_trainer_gets_every_core(tmp_path, monkeypatch):
    from prime_lora import devices, launcher

    monkeypatch.setattr(devices, "available_cpus", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(launcher, "available_cpus", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(launcher, "cpu_split", lambda: ([0, 1], [2, 3]))
    sft = RLConfig.model_validate({"output_dir": str(tmp_path / "sft"), "orchestrator": {
        "algo": {"type": "dataset_sft", "dataset": {"source": [{"dataset": "rows.jsonl"}]}}}})
    rl = RLConfig.model_validate({"output_dir": str(tmp_path / "rl"), "orchestrator": {"env": [{"id": "reverse-text"}]}})
    console = Console()
    assert launcher.Run(sft, tmp_path / "sft", None, console).trainer_cpus() == [0, 1, 2, 3]
    assert launcher.Run(rl, tmp_path / "rl", None, console).trainer_cpus() == [2, 3]  # vLLM takes the others
    assert launcher.Run(sft, tmp_path / "sft", None, console, part="trainer").trainer_cpus() == [2, 3]
