"""`prime train` with faults and bad input, through the installed script (tests/train/train_runs.py: the
real launcher, orchestrator and trainer on a tiny model, the scripted server in vLLM's place)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from prime_cli.records.training_run import read_training_run
from tests.support.cli import run_shell

from .train_runs import TrainProcess, run_train, train_env, write_workspace


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def manifest(out: Path) -> dict:
    """prime-train.json: the run's header (status, finished_at, error) and what it owns."""
    return json.loads((out / "prime-train.json").read_text())


def part_pids(cwd: Path, marker: str) -> list[int]:
    """Processes started in `cwd` whose command line holds `marker` (a run's parts)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == cwd and marker in (entry / "cmdline").read_bytes().decode():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


class FinishedRun(NamedTuple):
    cwd: Path  # the workspace: rl.toml, environments/, outputs/
    done: subprocess.CompletedProcess
    outputs_before: dict[str, bytes]  # outputs/ before the run: an eval run's folder

    @property
    def out(self) -> Path:
        return self.cwd / "outputs" / "rl" / "flaky-reward"


@pytest.fixture(scope="module")
def finished(tmp_path_factory, model) -> FinishedRun:
    """One 3-step run with the default output_dir, beside an eval run in outputs/evals/: read by the tests
    that need a finished run, and copied by those that change it (a run takes 10-40 s, mostly its start)."""
    cwd = tmp_path_factory.mktemp("finished")
    config = write_workspace(cwd, model, max_steps=3)
    eval_run = cwd / "outputs" / "evals" / "flaky-reward--m" / "20261124-000000-abcdef"
    eval_run.mkdir(parents=True)
    (eval_run / "metadata.json").write_text('{"env_id": "flaky-reward"}')
    (eval_run / "results.jsonl").write_text('{"reward": 1}\n')
    outputs_before = tree(cwd / "outputs")
    return FinishedRun(cwd, run_train([str(config)], cwd), outputs_before)  # the config names no output_dir


def test_eval_runs_and_foreign_folders_survive_and_force_deletes_exactly_the_list(tmp_path, model, finished):
    assert finished.done.returncode == 0, finished.done.stderr
    outputs = finished.cwd / "outputs"
    # outputs/evals/ holds what it held (no file more, none changed), and so does the rest of outputs/
    assert tree(outputs / "evals") == {k.removeprefix("evals/"): v for k, v in finished.outputs_before.items()}
    assert all(tree(outputs)[k] == v for k, v in finished.outputs_before.items())
    assert (finished.out / "weights" / "step_3").is_dir()
    recorded = manifest(finished.out)  # the versioned header first, as every run's metadata.json
    assert list(recorded)[:4] == ["format_version", "kind", "run_id", "status"] and recorded["kind"] == "training"
    assert recorded["status"] == "completed" and recorded["error"] is None and recorded["finished_at"], recorded

    config = write_workspace(tmp_path, model, max_steps=2)
    foreign = tmp_path / "d"
    (foreign / "checkpoints" / "step_1000").mkdir(parents=True)
    (foreign / "checkpoints" / "step_1000" / "model.bin").write_text("weights")
    (foreign / "evals" / "important").mkdir(parents=True)
    (foreign / "evals" / "important" / "results.jsonl").write_text("{}\n")
    before = tree(foreign)
    refused = run_train([str(config), "-o", str(foreign)], tmp_path)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "checkpoints/" in lines[0], refused.stderr
    assert "--force" in lines[0] and "-o DIR" in lines[0] and "Traceback" not in refused.stderr
    assert tree(foreign) == before

    dry = run_train([str(config), "-o", str(foreign), "--dry-run"], tmp_path)
    assert dry.returncode == 0 and "a real run would refuse to start" in dry.stdout, dry.stdout

    forced = run_train([str(config), "-o", str(foreign), "--force"], tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert not (foreign / "checkpoints" / "step_1000").exists()
    assert (foreign / "evals" / "important" / "results.jsonl").read_text() == "{}\n"


def test_a_resume_that_cannot_load_the_checkpoint_is_refused_before_anything_is_deleted(tmp_path, model,
                                                                                          finished):
    assert finished.done.returncode == 0, finished.done.stderr
    config = write_workspace(tmp_path, model, max_steps=3)
    out = tmp_path / "run"
    shutil.copytree(finished.out, out)  # its config names the same model, LoRA and steps
    before = tree(out)

    rank = run_train([str(config), "-o", str(out), "--resume-step", "2", "--set", "trainer.model.lora.rank=8"],
                     tmp_path)
    assert rank.returncode == 2 and "trainer.model.lora.rank changed (4 -> 8)" in rank.stderr, rank.stderr
    assert len(rank.stderr.strip().splitlines()) == 1
    optimizer = out / "checkpoints" / "step_3" / "trainer" / "optimizer.pt"
    optimizer.write_bytes(before[str(optimizer.relative_to(out))][:200])
    broken = run_train([str(config), "-o", str(out), "--resume-step", "3", "--set", "max_steps=4"], tmp_path)
    assert broken.returncode == 2 and "optimizer.pt is truncated" in broken.stderr, broken.stderr
    assert "--resume-step 2" in broken.stderr
    after = tree(out)
    after.pop("checkpoints/step_3/trainer/optimizer.pt")
    assert after == {k: v for k, v in before.items() if k != "checkpoints/step_3/trainer/optimizer.pt"}

    resumed = run_train([str(config), "-o", str(out), "--resume-step", "2", "--set", "max_steps=4"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "note: resuming with max_steps changed: 3 -> 4" in resumed.stderr
    assert "training done: 2 steps this run" in resumed.stderr
    assert [row["step"] for row in metrics(out)] == [1, 2, 3, 4]
    assert json.loads((out / "config.json").read_text())["max_steps"] == 4
    assert not (out / "config.pending.json").exists()


def test_a_second_run_on_a_folder_is_refused_and_a_killed_one_blocks_nothing(tmp_path, model):
    config = write_workspace(tmp_path, model, max_steps=30)
    out = tmp_path / "run"
    first = TrainProcess([str(config), "-o", str(out)], tmp_path, {"PRIME_TEST_FAKE_VLLM_ARGS": "--delay 0.5"})
    try:
        first.wait_for(lambda: (out / "logs" / "trainer.log").exists())  # started, nothing trained yet
        for extra in ([], ["--force"]):
            second = run_train([str(config), "-o", str(out), *extra], tmp_path)
            assert second.returncode == 2, second.stderr
            assert f"in use by another prime train (PID {first.proc.pid}" in second.stderr
            assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        first.wait_for(lambda: (out / "metrics.jsonl").exists())
        assert read_training_run(out).status == "running"
    finally:
        first.kill()  # SIGKILL to the whole run
    deadline = time.monotonic() + 20
    while part_pids(tmp_path, "prime_lora") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert read_training_run(out).status == "stopped"
    assert manifest(out)["status"] == "running"  # a killed launcher records nothing: the free lock says stopped
    again = run_train([str(config), "-o", str(out)], tmp_path)  # a stale lock file: refused as a trained run
    assert again.returncode == 2 and "already holds a training run" in again.stderr, again.stderr


@pytest.mark.parametrize("part", ["trainer", "inference"])
def test_a_dead_part_stops_the_run_with_the_resume_command_that_works(tmp_path, model, part):
    config = write_workspace(tmp_path, model, max_steps=40)
    out = tmp_path / "run"
    run = TrainProcess([str(config), "-o", str(out)], tmp_path, {"PRIME_TEST_FAKE_VLLM_ARGS": "--delay 0.3"})
    try:
        run.wait_for(lambda: (out / "checkpoints" / "step_2" / "orchestrator.json").exists()
                     and (out / "checkpoints" / "step_2" / "trainer").is_dir())
        marker = "prime_lora.trainer" if part == "trainer" else "tests.support.scripted_server"
        for pid in part_pids(tmp_path, marker):
            os.kill(pid, signal.SIGKILL)
        code, err = run.finish(timeout=60)
    finally:
        run.kill()
    assert code == 1, err
    assert f"{part} failed" in err
    recorded = manifest(out)
    assert recorded["status"] == "failed" and recorded["finished_at"], recorded
    assert recorded["error"].startswith(f"the {part} ") and "\n" not in recorded["error"], recorded
    assert read_training_run(out).status == "failed"
    resume = next(line for line in err.splitlines() if "continue with: " in line).split("continue with: ")[1]
    assert "steps trained this run" in err
    argv = shlex.split(resume)
    assert argv[:2] == ["prime", "train"] and argv[-2] == "--resume-step" and int(argv[-1]) >= 2
    resumed = run_shell(f"{resume} --set max_steps={int(argv[-1]) + 1}", tmp_path, train_env())
    assert resumed.returncode == 0, resumed.stderr
    assert "training done: 1 step this run" in resumed.stderr
    recorded = manifest(out)
    assert recorded["status"] == "completed" and recorded["error"] is None and recorded["finished_at"], recorded


def test_a_raising_reward_function_is_counted_shown_and_never_trained_on(tmp_path, model):
    # 2 of every 5 reward calls raise: 40%, above the default max_error_rate (0.1), so it is raised here
    config = write_workspace(tmp_path, model, max_steps=2, env_args="{fail_every = 5}")
    out = tmp_path / "run"
    done = run_train([str(config), "-o", str(out), "--set", "orchestrator.max_error_rate=0.6"], tmp_path)
    assert done.returncode == 0, done.stderr
    rows = metrics(out)
    for row in rows:
        assert 0.3 <= row["error_rate"] <= 0.5 and row["error_rate/reward:flaky_reward"] == row["error_rate"]
        assert row["errored_rollouts"] == round(row["error_rate"] * row["rollouts_sampled"])
        batch = (out / "rollouts" / f"step_{row['step']}" / "batch.jsonl").read_text().splitlines()
        assert len(batch) == row["rollouts_sampled"] - row["errored_rollouts"]  # the failed ones are not trained
    step_lines = [line for line in done.stderr.splitlines() if line.startswith("step ")]
    assert len(step_lines) == 2 and all("errors " in line and "reward:flaky_reward" in line for line in step_lines)
    log = (out / "logs" / "orchestrator.log").read_text()
    assert log.count("rollout error at step") == 1 and log.count("Traceback") == 1  # once per distinct error
    assert "raised ValueError: the reward function broke (a test fault)" in log


def test_a_run_where_every_rollout_fails_stops_with_the_cause_and_exit_1(tmp_path, model):
    config = write_workspace(tmp_path, model, max_steps=3, env_args="{fail_all = true}")
    out = tmp_path / "run"
    failed = run_train([str(config), "-o", str(out)], tmp_path)
    assert failed.returncode == 1, failed.stderr
    assert "training done" not in failed.stderr
    stopped = next(line for line in failed.stderr.splitlines() if line.startswith("training stopped: "))
    assert "ValueError: the reward function broke (a test fault)" in stopped and "at step 1" in stopped
    assert "0 steps trained this run" in failed.stderr and not (out / "metrics.jsonl").exists()
    assert manifest(out)["status"] == "failed" and manifest(out)["error"] == stopped
