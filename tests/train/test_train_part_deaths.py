"""`prime train CONFIG --part ...` as three (or four) processes, one of them killed (SIGKILL): the others stop
within the bound with one line naming what died and the command that resumes every part; a part that
waits says so. Short bounds through PRIME_TRAIN_PART_TIMEOUT_S and PRIME_TRAIN_WAIT_NOTICE_S (the
scripted server in vLLM's place; tests/train/train_runs.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from prime_cli.runs.layouts import TrainingRunLayout
from prime_cli.serve.server import free_port, served_models

from .train_runs import TrainProcess, run_train, write_workspace

BOUND_S = 4  # a silent part is gone after this
SHORT = {"PRIME_TRAIN_PART_TIMEOUT_S": str(BOUND_S), "PRIME_TRAIN_WAIT_NOTICE_S": "1"}
STOPPED_WITHIN_S = BOUND_S + 25  # the bound, then the part's own stop (its children get 10 s to end)


class Parts:
    """The inference part, the trainer part(s) and the orchestrator part of one run, started apart."""

    def __init__(self, cwd: Path, model: Path, nodes: int = 1):
        self.port, rdzv = free_port(), free_port()
        deployment = (f'[deployment]\ntype = "multi_node"\nnum_train_nodes = {nodes}\n'
                      f'rdzv_endpoint = "127.0.0.1:{rdzv}"\n') if nodes > 1 else ""
        extra = f'[orchestrator.client]\nbase_url = "http://127.0.0.1:{self.port}/v1"\n{deployment}'
        self.config = write_workspace(cwd, model, max_steps=40, extra=extra)
        self.cwd, self.layout = cwd, TrainingRunLayout(cwd / "outputs" / "rl" / "flaky-reward")
        self.procs: dict[str, TrainProcess] = {}
        self.start("inference", "--set", f"inference.port={self.port}", env={"PRIME_TEST_FAKE_VLLM_ARGS": "--delay 0.2"})
        self.procs["inference"].wait_for(lambda: served_models(f"http://127.0.0.1:{self.port}/v1") is not None, 60)
        self.start("trainer")
        for rank in range(1, nodes):
            self.start(f"node{rank}", "--node-rank", str(rank))
        self.start("orchestrator")

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        part = "trainer" if name.startswith("node") else name
        self.procs[name] = TrainProcess([str(self.config), "--part", part, *args], self.cwd, {**SHORT, **(env or {})})

    def wait_for_checkpoint(self) -> int:
        self.procs["trainer"].wait_for(lambda: self.layout.checkpoint_steps(), timeout=180)
        return self.layout.checkpoint_steps()[-1]

    def kill(self, name: str) -> float:
        """SIGKILL the part's `prime train` (its children die with it); when."""
        os.kill(self.procs[name].proc.pid, signal.SIGKILL)
        self.procs[name].proc.wait()
        return time.monotonic()

    def finish(self, name: str) -> tuple[int, str, float]:
        code, err = self.procs[name].finish(timeout=STOPPED_WITHIN_S + 30)
        return code, err, time.monotonic()

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()


def resume_line(err: str, config: Path, nodes: int = 1) -> None:
    """The line names the resume command of every part, from the last checkpoint."""
    line = next(line for line in err.splitlines() if " is gone: " in line)
    assert "continue with: prime train " in line and "--resume-step " in line, line
    assert line.count("--part trainer") == nodes and "--part orchestrator" in line, line
    for rank in range(1, nodes):
        assert f"--part trainer --node-rank {rank}" in line, line


def test_a_killed_trainer_part_stops_the_orchestrator_and_the_other_trainer_node(tmp_path, model):
    parts = Parts(tmp_path, model, nodes=2)
    try:
        parts.wait_for_checkpoint()
        killed = parts.kill("trainer")
        results = {name: parts.finish(name) for name in ("orchestrator", "node1")}
    finally:
        parts.close()
    for name, (code, err, ended) in results.items():
        assert code == 1, f"{name}: {err[-3000:]}"
        assert ended - killed < STOPPED_WITHIN_S, f"{name} took {ended - killed:.0f} s"
        assert "the trainer part (node 0) is gone: no heartbeat for " in err, err[-3000:]
        resume_line(err, parts.config, nodes=2)
    assert "waiting for the trainer's weights of step " in results["orchestrator"][1]


def test_a_killed_orchestrator_part_stops_the_trainer_part(tmp_path, model):
    parts = Parts(tmp_path, model)
    try:
        step = parts.wait_for_checkpoint()
        killed = parts.kill("orchestrator")
        code, err, ended = parts.finish("trainer")
    finally:
        parts.close()
    assert code == 1, err[-3000:]
    assert ended - killed < STOPPED_WITHIN_S
    assert "the orchestrator part is gone: no heartbeat for " in err, err[-3000:]
    assert "waiting for the orchestrator's batch for step " in err
    assert "the orchestrator part is running (heartbeat " in err
    resume_line(err, parts.config)
    assert parts.layout.checkpoint_steps()[-1] >= step


def test_a_killed_inference_part_fails_the_orchestrator_and_the_trainer_part_reads_why(tmp_path, model):
    parts = Parts(tmp_path, model)
    try:
        parts.wait_for_checkpoint()
        killed = parts.kill("inference")
        orchestrator = parts.finish("orchestrator")
        trainer = parts.finish("trainer")
    finally:
        parts.close()
    # the orchestrator fails on the dead server, or stops on the step's error rate first (rollouts refused)
    assert orchestrator[0] == 1, orchestrator[1][-3000:]
    assert "orchestrator failed:" in orchestrator[1] or "training stopped:" in orchestrator[1], orchestrator[1][-3000:]
    code, err, ended = trainer
    assert code == 1 and ended - killed < STOPPED_WITHIN_S + 20, err[-3000:]
    gone = next(line for line in err.splitlines() if " is gone: " in line)
    assert gone.startswith(("the orchestrator part is gone: it stopped (the orchestrator exited (code 1)",
                            "the orchestrator part is gone: it stopped (training stopped: ")), gone
    resume_line(err, parts.config)


def test_a_bad_bound_is_one_line_and_exit_2_before_the_folder_is_touched(tmp_path, model):
    config = write_workspace(tmp_path, model)
    done = run_train([str(config), "--part", "trainer"], tmp_path, extra_env={"PRIME_TRAIN_PART_TIMEOUT_S": "soon"})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PRIME_TRAIN_PART_TIMEOUT_S='soon': give a number"), lines
    assert not (tmp_path / "outputs").exists()
