"""How `prime train` stops on a signal, through the installed script (tests/train/train_runs.py): a closed
terminal (SIGHUP) stops it like Ctrl-C, with the line and the resume command; SIGTERM exits 143; a stop
before the first checkpoint leaves no checkpoint folder to be mistaken for one; --force says what it deleted."""

from __future__ import annotations

import fcntl
import os
import pty
import shlex
import signal
import subprocess
import termios
import time

from prime_cli.runs.layouts import TrainingRunLayout
from tests.support.cli import PRIME, prime_env

from .test_train_faults import manifest, part_pids
from .train_runs import TrainProcess, train_env, write_workspace


def wait_until(predicate, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"prime train ended early ({proc.returncode}): {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out waiting for the run"
        time.sleep(0.1)


def test_a_closed_terminal_stops_the_run_like_ctrl_c_with_the_resume_command(tmp_path, model):
    config = write_workspace(tmp_path, model, max_steps=40)
    out = TrainingRunLayout(tmp_path / "run")
    master, terminal = pty.openpty()
    # the terminal is the run's controlling terminal (its stdin); stdout and stderr are read here
    run = subprocess.Popen([str(PRIME), "train", str(config), "-o", str(out.output_dir)], cwd=tmp_path,
                           env=prime_env(train_env({"PRIME_TEST_FAKE_VLLM_ARGS": "--delay 0.3"})), stdin=terminal,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: (signal.signal(signal.SIGHUP, signal.SIG_DFL),  # the suite may run under nohup
                                               fcntl.ioctl(0, termios.TIOCSCTTY, 0)))
    os.close(terminal)
    try:
        wait_until(lambda: out.checkpoint_steps(), run)
        os.close(master)  # the terminal closes: the kernel hangs it up and sends SIGHUP
        master = -1
        _, err = run.communicate(timeout=60)
    finally:
        if master >= 0:
            os.close(master)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode == 129, err[-3000:]
    assert "stopping all parts (SIGHUP (the terminal closed))" in err and "Traceback" not in err, err[-3000:]
    resume = shlex.split(next(line for line in err.splitlines() if "continue with: " in line).split("continue with: ")[1])
    assert resume[:3] == ["prime", "train", str(out.config_path)] and resume[3] == "--resume-step"
    assert int(resume[4]) in out.checkpoint_steps()
    assert not part_pids(tmp_path, "prime_lora") and not part_pids(tmp_path, "tests.support.scripted_server")


def test_sigterm_exits_143_and_a_stop_before_the_first_checkpoint_leaves_no_checkpoint_folder(tmp_path, model):
    config = write_workspace(tmp_path, model, max_steps=40)
    out = TrainingRunLayout(tmp_path / "d")
    (out.output_dir / "checkpoints" / "step_1000").mkdir(parents=True)  # not a prime run's: --force deletes it
    (out.output_dir / "checkpoints" / "step_1000" / "model.bin").write_text("weights")
    run = TrainProcess([str(config), "-o", str(out.output_dir), "--force", "--set", "trainer.ckpt.interval=100"],
                       tmp_path, {"PRIME_TEST_FAKE_VLLM_ARGS": "--delay 0.3"})
    try:
        run.wait_for(lambda: out.metrics_path.exists() and len(out.metrics_path.read_text().splitlines()) >= 2)
        os.kill(run.proc.pid, signal.SIGTERM)
        code, err = run.finish(timeout=60)
    finally:
        run.kill()
    assert code == 143, err[-3000:]
    assert f"--force deleted checkpoints/ (1 entry of {out.output_dir})" in err.splitlines()
    assert "stopping all parts (SIGTERM)" in err
    recorded = manifest(out.output_dir)
    assert recorded["status"] == "stopped" and recorded["error"] == "stopped by SIGTERM" and recorded["finished_at"]
    assert "no checkpoint was written yet (every 100 steps)" in err
    assert len(out.steps(out.ROLLOUTS)) >= 2  # the orchestrator had written its progress for those steps
    leftovers = sorted(str(p.relative_to(out.output_dir)) for p in (out.output_dir / out.CHECKPOINTS).rglob("*")) \
        if (out.output_dir / out.CHECKPOINTS).exists() else []
    assert leftovers == [], leftovers
