"""The launcher's process supervision, with stand-ins for the three parts (real processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_folders import write_run

from prime_cli.serve.process import group_alive
from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import TrainingRunLayout, write_manifest
from prime_lora import launcher, run_dir
from prime_lora.progress import WANDB_NOTICE, MetricsTail, NoticeTail, step_line

REPO = Path(__file__).resolve().parents[3]


def config(tmp_path, **kw) -> RLConfig:
    from prime_cli.serve.server import free_port

    return RLConfig.model_validate({
        "max_steps": 3, "output_dir": str(tmp_path / "out"),
        "orchestrator": {"batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "reverse-text"}]},
        "inference": {"port": free_port()}, **kw})


def fake_parts(monkeypatch, tmp_path, trainer_code: str, orchestrator_code: str = "import time; time.sleep(600)"):
    """Scripted server for vLLM (plus a grandchild), python one-liners for trainer and orchestrator."""
    started: dict[str, list[str]] = {}

    def inference_spec(self):
        code = ("import os, subprocess, sys\n"
                f"open({str(tmp_path / 'vllm.pid')!r}, 'w').write(str(os.getpid()))\n"
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                f"from tests.support.scripted_server import main; main(['--port', '{self.options.port}'])\n")
        started["inference"] = [str(self.options.port)]
        return [sys.executable, "-c", code], {**os.environ, "PYTHONPATH": str(REPO)}

    def trainer_command(cfg, config_path, resume_step, node_rank=0):
        started["trainer"] = [str(config_path), str(resume_step)]
        return [sys.executable, "-c", trainer_code, str(config_path.parent)]

    def orchestrator_command(config_path, base_urls, resume_step):
        (base_url,) = base_urls
        started["orchestrator"] = [base_url]
        return [sys.executable, "-c", orchestrator_code, base_url]

    monkeypatch.setattr(launcher.InferenceServer, "launch_spec", inference_spec)
    monkeypatch.setattr(launcher, "trainer_command", trainer_command)
    monkeypatch.setattr(launcher, "orchestrator_command", orchestrator_command)
    monkeypatch.setattr("prime_cli.train.plugin_api.training_weights",
                        lambda name: SimpleNamespace(path="/models/tiny", served_name="tiny", is_local_embedded=False))
    return started


TRAINER_OK = """
import json, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
for step in (1, 2, 3):
    (out / "weights" / f"step_{step}").mkdir(parents=True)
    with open(out / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step, "reward_mean": 0.1 * step, "reward_std": 0.01}) + "\\n")
    time.sleep(0.2)
"""


def manifest(tmp_path) -> dict:
    return json.loads((tmp_path / "out" / "prime-train.json").read_text())


def test_a_run_streams_steps_and_stops_every_part(tmp_path, monkeypatch, capsys):
    started = fake_parts(monkeypatch, tmp_path, TRAINER_OK)
    cfg = config(tmp_path)
    code = launcher.launch(cfg, Path(cfg.output_dir))
    err = capsys.readouterr().err
    assert code == 0, err
    recorded = manifest(tmp_path)
    assert recorded["status"] == "completed" and recorded["error"] is None and recorded["finished_at"]
    assert "step 3/3" in err and "reward 0.300" in err and "0.100 0.200 0.300" in err
    assert started["orchestrator"][0].endswith("/v1") and started["inference"][0] in started["orchestrator"][0]
    saved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert saved["max_steps"] == 3
    assert (tmp_path / "out" / "logs" / "inference.log").exists()


# like the trainer: its W&B lines go to stderr, and each step's `step N: ...` line follows its metrics row
TRAINER_WANDB_OFFLINE = """
import json, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
print("W&B: cannot reach https://api.wandb.ai; logging offline instead", file=sys.stderr, flush=True)
print("wandb: a line of wandb's own", file=sys.stderr, flush=True)
for step in (1, 2, 3):
    (out / "weights" / f"step_{step}").mkdir(parents=True)
    with open(out / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step, "reward_mean": 0.1 * step, "reward_std": 0.01}) + "\\n")
    print(f"step {step}: loss 0.1", flush=True)
    time.sleep(0.2)  # as TRAINER_OK: still running when the launcher has started every part
print("W&B: offline run saved in OUT/wandb/offline-run-1; upload it with: wandb sync OUT/wandb/offline-run-1",
      file=sys.stderr, flush=True)
"""


def test_the_trainers_wandb_lines_reach_the_terminal_once_even_the_last_one(tmp_path, monkeypatch, capsys):
    fake_parts(monkeypatch, tmp_path, TRAINER_WANDB_OFFLINE)
    cfg = config(tmp_path)
    (tmp_path / "out" / "logs").mkdir(parents=True)
    write_manifest(TrainingRunLayout(tmp_path / "out"))  # an earlier start in this folder that trained nothing
    (tmp_path / "out" / "logs" / "trainer.log").write_text("W&B: a line of an earlier run\n")
    assert launcher.launch(cfg, Path(cfg.output_dir)) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines.count("W&B: cannot reach https://api.wandb.ai; logging offline instead") == 1
    assert lines.count("W&B: offline run saved in OUT/wandb/offline-run-1; upload it with: "
                       "wandb sync OUT/wandb/offline-run-1") == 1
    assert "earlier run" not in err and "wandb's own" not in err
    assert err.index("logging offline instead") < err.index("step 1/3") < err.index("step 3/3") < err.index("wandb sync")


def test_a_dying_part_stops_the_others_and_shows_its_log(tmp_path, monkeypatch, capsys):
    spawned = tmp_path / "pids"
    orchestrator = f"import os, time; open({str(spawned)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    fake_parts(monkeypatch, tmp_path, "import time, sys; time.sleep(1.5); print('CUDA out of memory: boom'); sys.exit(3)", orchestrator)
    cfg = config(tmp_path)
    code = launcher.launch(cfg, Path(cfg.output_dir))
    err = capsys.readouterr().err
    assert code == 1
    assert "trainer failed" in err and "code 3" in err and "CUDA out of memory: boom" in err
    assert manifest(tmp_path)["status"] == "failed"
    assert manifest(tmp_path)["error"] == "the trainer exited (code 3)"
    assert "trainer.log" in err
    deadline = time.monotonic() + 5
    while group_alive(int(spawned.read_text())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(int(spawned.read_text())), "the orchestrator was left running"


def test_killing_the_inference_server_ends_the_run_clearly(tmp_path, monkeypatch, capsys):
    # the orchestrator stand-in kills vLLM's process group once it is up, as a crash would
    kill_vllm = ("import os, signal, time\n"
                 f"pid = int(open({str(tmp_path / 'vllm.pid')!r}).read())\n"
                 "os.killpg(os.getpgid(pid), signal.SIGKILL); time.sleep(600)")
    fake_parts(monkeypatch, tmp_path, "import time; time.sleep(600)", kill_vllm)
    cfg = config(tmp_path)
    started = time.monotonic()
    code = launcher.launch(cfg, Path(cfg.output_dir))
    err = capsys.readouterr().err
    assert code == 1 and "inference failed" in err and "killed" in err, err
    assert time.monotonic() - started < 60


def test_fresh_start_refuses_a_directory_that_holds_a_run_and_resume_rewinds_it(tmp_path):
    out = tmp_path / "out"
    cfg = write_run(out, 3, checkpoints=(2,))
    with open(out / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 4')  # cut short by a kill
    with pytest.raises(run_dir.RunDirError, match="--resume-step 2"):
        run_dir.prepare(cfg, out, None)
    with pytest.raises(run_dir.RunDirError, match=r"available: 2"):
        run_dir.prepare(cfg, out, 1)
    run_dir.prepare(cfg, out, 2).lock.release()
    assert run_dir.steps_in(out / "weights") == [0, 1, 2] and run_dir.steps_in(out / "rollouts") == [1, 2]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_metrics_tail_reads_only_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.poll() == []
    path.write_text('{"step": 1}\n{"step": 2, "rew')
    assert [r["step"] for r in tail.poll()] == [1]
    with open(path, "a") as handle:
        handle.write('ard_mean": 0.5}\n')
    assert tail.poll() == [{"step": 2, "reward_mean": 0.5}]
    line = step_line({"step": 2, "reward_mean": 0.5, "reward_std": 0.1, "skipped": True}, 10)
    assert line.startswith("step 2/10  reward 0.500 ± 0.100") and "SKIPPED" in line


@pytest.mark.parametrize("flavour", ["cpu", "gpu"])
def test_vllm_ignores_the_models_generation_config_and_returns_processed_logprobs(tmp_path, flavour):
    """A generation_config.json (Qwen3: top_k=20) would otherwise become vLLM's sampling default."""
    from prime_cli.serve.server import build_command

    cfg = config(tmp_path)
    command = build_command(launcher.inference_options(cfg, "/models/tiny", "tiny"), flavour)
    pairs = dict(zip(command, command[1:], strict=False))
    assert pairs["--generation-config"] == "vllm" and pairs["--logprobs-mode"] == "processed_logprobs"


def test_notice_tail_keeps_the_step_each_notice_followed_and_skips_older_lines(tmp_path):
    log = tmp_path / "trainer.log"
    log.write_text("W&B: from an earlier run\n")
    tail = NoticeTail(log, WANDB_NOTICE)
    with log.open("a") as handle:
        handle.write("W&B: offline instead\nwandb: its own\nstep 1: loss 0.1\nstep 2: loss 0.1\nW&B: sync it\nW&B: partial")
    assert tail.poll() == [(0, "W&B: offline instead"), (2, "W&B: sync it")]
    with log.open("a") as handle:
        handle.write(" line\n")
    assert tail.poll() == [(2, "W&B: partial line")]


# a step whose errors name a reward function holding an OSC, then a trainer dying with control characters and
# Rich markup in its last words
TRAINER_EVIL = """
import json, sys, time, pathlib
out = pathlib.Path(sys.argv[1])
(out / "weights" / "step_1").mkdir(parents=True)
with open(out / "metrics.jsonl", "a") as f:
    f.write(json.dumps({"step": 1, "reward_mean": 0.1, "reward_std": 0.01, "error_rate": 0.5, "rollouts_sampled": 4,
                        "error_rate/reward:score\\x1b]0;pwned\\x07": 0.5}) + "\\n")
time.sleep(1.5)
print("boom \\x1b[2J\\x1b]0;pwned\\x07\\x9b31m [/] done", flush=True)
sys.exit(3)
"""


def test_a_parts_last_words_and_error_kinds_are_shown_escaped(tmp_path, monkeypatch, capsys):
    fake_parts(monkeypatch, tmp_path, TRAINER_EVIL)
    cfg = config(tmp_path)
    assert launcher.launch(cfg, Path(cfg.output_dir)) == 1
    err = capsys.readouterr().err
    assert "boom \\x1b[2J\\x1b]0;pwned\\x07\\x9b31m [/] done" in err  # escaped, and not read as markup
    assert "errors 50% (reward:score\\x1b]0;pwned\\x07 2)" in err
    assert not any(c in err for c in "\x1b\x07\x9b\r")


def test_an_unexpected_error_in_the_watch_loop_still_stops_every_part(tmp_path, monkeypatch):
    """Not only the failures the launcher expects: any exception leaves no part running (the parent-death
    signal would not help here, as the launcher itself lives on)."""
    fake_parts(monkeypatch, tmp_path, "import time; time.sleep(600)")
    groups: list[int] = []

    def broken_progress(self, status):
        groups.extend(part.pid for part in self.parts().values() if part is not None and part.pid)
        raise RuntimeError("a bug in the watch loop")

    monkeypatch.setattr(launcher.Run, "show_progress", broken_progress)
    cfg = config(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="a bug in the watch loop"):
            launcher.launch(cfg, Path(cfg.output_dir))
        assert len(groups) == 3  # inference (and its grandchild), trainer, orchestrator
        recorded = manifest(tmp_path)
        assert recorded["status"] == "failed"
        assert recorded["error"] == "its launcher failed: RuntimeError: a bug in the watch loop"
        left = [pgid for pgid in groups if group_alive(pgid)]
        assert not left, "parts left running after an unexpected error"
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


TRAINER_CORRUPT = """
import sys, time, pathlib
out = pathlib.Path(sys.argv[1])
(out / "metrics.jsonl").write_text('{"step": 1}\\n{"step": 2, "rew\\n{"step": 3}\\n')
time.sleep(600)
"""


def test_a_damaged_metrics_line_ends_the_run_with_one_line_naming_it(tmp_path, monkeypatch, capsys):
    fake_parts(monkeypatch, tmp_path, TRAINER_CORRUPT)
    cfg = config(tmp_path)
    code = launcher.launch(cfg, Path(cfg.output_dir))
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "metrics.jsonl:2: " in line]
    assert line.startswith("error: ") and "not valid JSON" in line
    recorded = manifest(tmp_path)
    assert recorded["status"] == "failed" and "metrics.jsonl:2: not valid JSON" in recorded["error"]
