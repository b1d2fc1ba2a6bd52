"""The training screens of `prime eval tui` on a hand-written `prime train` output folder."""

from __future__ import annotations

import json

import pytest

from prime_cli.records.training_run import read_training_run
from prime_cli.runs.layouts import TrainingRunLayout
from prime_cli.tui.app import make_app
from prime_cli.tui.locate import locate
from prime_cli.tui.screens.training import TrainingScreen, reward_curve
from prime_cli.tui.screens.training_step import StepSamplesScreen
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.training_fixtures import write_training_run


async def test_a_training_folder_opens_on_its_steps_and_curve(tmp_path):
    out = write_training_run(tmp_path / "outputs", steps=4, trained=3)
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TrainingScreen)
        text = screen_text(app)
        assert "training · reverse-text · local · outputs" in text and "step 3/6 trained" in text
        assert "reward mean per step" in text and "0.900" in text and "0.300" in text  # the curve's axis
        lines: dict[str, list[str]] = {}
        for words in (line.split() for line in text.splitlines()):
            if words and words[0].isdigit():
                lines.setdefault(words[0], words)
        assert lines["2"][:6] == ["2", "0.500", "0.100", "2.00e-03", "0.020", "1.000"]
        assert lines["4"][:4] == ["4", "0.900", "0.200", "–"]  # sampled, not trained yet
        assert "4 steps sampled, 3 trained" in text


async def test_enter_shows_a_steps_samples_with_decoded_and_masked_tokens(tmp_path):
    out = write_training_run(tmp_path / "run", steps=3, tokenizer=True)
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepSamplesScreen) and app.screen.step == 2
        text = screen_text(app)
        assert "step 2 · run" in text and "2 samples" in text
        assert "2 prompt, 2 trained, 2 masked" in text
        assert "Reverse: abc cba [tool] ok ." in text  # decoded with the run's tokenizer
        styles = {seg.text.strip(): str(seg.style) for strip in app.screen._compositor.render_strips()
                  for seg in strip if seg.text.strip() in {"[tool] ok", "cba"}}
        assert "on yellow" in styles["[tool] ok"] or "on #" in styles["[tool] ok"]
        await pilot.press("down")
        await settle(pilot)
        assert "-0.100" in screen_text(app)  # the second sample's advantage
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, TrainingScreen)


async def test_without_a_tokenizer_samples_show_counts(tmp_path):
    out = write_training_run(tmp_path / "run", steps=1)
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "token counts only" in text and "2 prompt, 2 trained, 2 masked" in text


async def test_a_running_run_is_followed(tmp_path):
    out = write_training_run(tmp_path / "run", steps=2, max_steps=3)
    app = make_app(out, live_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "step 2/3 trained" in screen_text(app)
        layout = TrainingRunLayout(out)
        with layout.metrics_path.open("a") as metrics:
            metrics.write(json.dumps({"step": 3, "reward_mean": 0.95, "mismatch_kl": 0.5}) + "\n")
        for _ in range(20):
            await pilot.pause(0.05)
            if "step 3/3 trained" in screen_text(app):
                break
        assert "step 3/3 trained" in screen_text(app) and "completed" in screen_text(app)


async def test_an_outputs_folder_lists_the_training_run_and_opens_it(tmp_path):
    write_training_run(tmp_path / "outputs" / "rl-run", steps=2)
    located = locate(tmp_path / "outputs")
    assert [e.kind for e in located.entries] == ["training"] and located.start is None
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "rl-run" in text and " rl " in text and "2 steps" in text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TrainingScreen) and "training · reverse-text" in screen_text(app)


def test_reader_merges_stats_under_metrics_and_skips_a_torn_line(tmp_path):
    out = write_training_run(tmp_path / "run", steps=2)
    with TrainingRunLayout(out).metrics_path.open("a") as metrics:
        metrics.write('{"step": 3, "rew')
    run = read_training_run(out)
    assert [s["step"] for s in run.steps] == [1, 2] and run.trained_steps == 2
    assert run.steps[0]["generation_s"] == 2.5 and run.steps[0]["train_s"] == 3.5


def test_reward_curve_rises_with_the_rewards_and_buckets_long_runs():
    rows = reward_curve([(1, 0.0), (2, 0.5), (3, 1.0)], width=40, height=4).plain.splitlines()
    top, bottom = rows[0], rows[3]
    assert top.startswith("  1.000") and bottom.startswith("  0.000")
    assert top.rstrip().endswith("██") and top[8:10] == "  "  # only the last step reaches the top
    long = reward_curve([(i, float(i)) for i in range(1, 201)], width=50).plain
    assert "(4 steps per column)" in long and "step 1 … 200" in long


SNAPSHOTS = {"training": [], "training_step": ["down", "enter"]}


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_training_screen_snapshot(name, tmp_path, snap_compare):
    app = make_app(write_training_run(tmp_path / "outputs", steps=6, max_steps=6, tokenizer=True))

    async def drive(pilot):
        await settle(pilot)
        for key in SNAPSHOTS[name]:
            await pilot.press(key)
            await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=drive)


def test_the_tokenizer_is_found_from_an_adapters_relative_base_path(tmp_path):
    from prime_cli.records.training_run import tokenizer_folder
    from tests.tui.training_fixtures import write_tokenizer

    out = write_training_run(tmp_path / "work" / "run", steps=1)
    assert tokenizer_folder(out) is None  # model "local", no adapter saved: counts only
    write_tokenizer(tmp_path / "work" / "model")
    layout = TrainingRunLayout(out)
    layout.weights_dir(0).mkdir(parents=True)
    (layout.weights_dir(0) / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "work/model"}))
    assert tokenizer_folder(out) == tmp_path / "work" / "model"


async def test_online_evals_show_as_a_curve_per_environment(tmp_path):
    out = write_training_run(tmp_path / "outputs", steps=4, trained=4)
    lines = [{"step": 0, "policy_step": 0, "eval/reverse-text/reward/mean": 0.125},
             {"step": 2, "policy_step": 2, "eval/reverse-text/reward/mean": 0.25},
             {"step": 4, "policy_step": 4, "eval/reverse-text/reward/mean": 0.5}]
    TrainingRunLayout(out).evals_path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"step": 6')
    assert read_training_run(out).eval_curves() == {"reverse-text": [(0, 0.125), (2, 0.25), (4, 0.5)]}
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "online eval: mean reward at the evaluated steps" in text
        assert "reverse-text  ▁▃█  0: 0.125 · 2: 0.250 · 4: 0.500" in text


async def test_without_online_evals_there_is_no_eval_card(tmp_path):
    app = make_app(write_training_run(tmp_path / "outputs", steps=2))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "online eval" not in screen_text(app)


ERRORED = {"rollouts_sampled": 32, "errored_rollouts": 12, "error_rate": 0.375,
           "error_rate/reward:correct_answer": 10 / 32, "error_rate/ModelError": 2 / 32}


async def test_a_run_with_errored_rollouts_shows_the_error_rate_per_step_and_the_kinds(tmp_path):
    out = write_training_run(tmp_path / "outputs", steps=3, step_stats={2: ERRORED, 3: {"error_rate": 0.0}})
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        header = next(line for line in text.splitlines() if "entropy" in line)
        assert header.split()[-1] == "errors"
        rows: dict[str, list[str]] = {}
        for words in (line.split() for line in text.splitlines()):
            if words and words[0].isdigit():
                rows.setdefault(words[0], words)
        assert rows["2"][-1] == "38%" and rows["3"][-1] == "0%" and rows["1"][-1] == "–"
        assert "step 2  38% of 32 rollouts  reward:correct_answer 10, ModelError 2" in text
        assert "1 step with errors; errored rollouts are not trained on" in text
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepSamplesScreen) and app.screen.step == 2
        assert "errors 38% (reward:correct_answer 10, ModelError 2): not trained on" in screen_text(app)


async def test_a_run_without_errors_has_no_errors_column(tmp_path):
    app = make_app(write_training_run(tmp_path / "outputs", steps=2, step_stats={1: {"error_rate": 0.0}}))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "errors" not in screen_text(app) and "errored rollouts" not in screen_text(app)


def write_sft_run(out, steps: int = 3, teacher_kl: bool = False):
    """An SFT run's folder (config with trainer.loss.type "sft" and a data source; rows without rewards)."""
    layout = TrainingRunLayout(out)
    out.mkdir(parents=True)
    layout.config_path.write_text(json.dumps({
        "max_steps": 5, "model": {"name": "local"}, "trainer": {"loss": {"type": "sft"}},
        "orchestrator": {"env": [], "algo": {"type": "dataset_sft",
                                             "dataset": {"source": [{"dataset": "/data/reverse-train.jsonl"}]}}}}))
    with layout.metrics_path.open("w") as metrics:
        for step in range(1, steps + 1):
            layout.rollouts_dir(step).mkdir(parents=True)
            layout.batch_stats_path(step).write_text(json.dumps({"step": step, "samples": 16}))
            layout.batch_path(step).write_text(json.dumps({"input_ids": [1, 2], "loss_mask": [0, 1],
                                                           "inference_logprobs": [0.0, 0.0], "advantage": 0.0}) + "\n")
            metrics.write(json.dumps({"step": step, "loss": 2.0 / step, "nll": 1.5 / step, "entropy": 1.1,
                                      "num_tokens": 480, "grad_norm": 0.75, "train_s": 4.0, "wait_batch_s": 0.5,
                                      **({"teacher_kl": 0.5 / step} if teacher_kl else {})}) + "\n")
    return out


async def test_an_sft_run_shows_its_loss_curve_and_sft_columns(tmp_path):
    out = write_sft_run(tmp_path / "sft-run")
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, TrainingScreen)
        text = screen_text(app)
        assert "SFT · reverse-train.jsonl · local · sft-run" in text and "step 3/5 trained" in text
        assert "SFT loss per step" in text and "2.000" in text and "0.667" in text  # the curve's axis: the loss
        assert "reward mean per step" not in text
        rows: dict[str, list[str]] = {}
        for words in (line.split() for line in text.splitlines()):
            if words and words[0].isdigit():
                rows.setdefault(words[0], words)
        assert rows["2"][:6] == ["2", "1.0000", "0.7500", "1.100", "480", "0.750"]


async def test_a_distillation_run_shows_the_teacher_kl(tmp_path):
    out = write_training_run(tmp_path / "distill", steps=2,
                             step_stats={1: {"teacher_kl": 0.25}, 2: {"teacher_kl": 0.125}})
    app = make_app(out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "teacher kl" in text and "reward mean per step" in text
        rows: dict[str, list[str]] = {}
        for words in (line.split() for line in text.splitlines()):
            if words and words[0].isdigit():
                rows.setdefault(words[0], words)
        assert "1.25e-01" in rows["2"] and "2.50e-01" in rows["1"]
