"""W&B in the trainer with the real wandb library, offline (no test reaches the network)."""

from __future__ import annotations

import http.server
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lora_tiny import tiny_config
from wandb_records import history, run_config

from prime_lora.trainer.loop import MetricsLog

SECRET = "sk-wandb-test-0123456789abcdef0123456789abcdef"  # 40+ characters, the shape of a W&B key
SYNC = re.compile(r"wandb sync (\S+)")


@pytest.fixture(autouse=True)
def isolated_wandb(tmp_path, monkeypatch):
    """No stored login, no settings of the developer's own, quiet."""
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_DIR", "WANDB_ENTITY", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(home / ".config" / "wandb"))
    monkeypatch.setenv("WANDB_SILENT", "true")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AnswersEverything(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):  # noqa: N802
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def notices(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("W&B: ")]


def offline_runs(out: Path) -> list[Path]:
    return sorted((out / "wandb").glob("offline-run-*"))


def test_online_without_network_falls_back_offline_with_one_line_and_the_sync_command(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    out = tmp_path / "out"
    out.mkdir()
    log = MetricsLog(out, tiny_config(out, wandb={"project": "p", "mode": "online"}))
    start_lines = notices(capfd.readouterr().err)
    log.write({"step": 1, "reward_mean": 0.5})
    log.close()
    (run_dir,) = offline_runs(out)
    assert len(start_lines) == 1, start_lines
    assert "cannot reach http://127.0.0.1" in start_lines[0] and "offline" in start_lines[0]
    assert str(run_dir) in start_lines[0]
    assert SYNC.search(start_lines[0]).group(1) == shlex.quote(str(run_dir))
    assert history(run_dir)[0][1]["reward/mean"] == 0.5


NO_KEY_RUN = """
import sys
from pathlib import Path
from lora_tiny import tiny_config
from prime_lora.trainer.loop import MetricsLog
out = Path(sys.argv[1])
MetricsLog(out, tiny_config(out, wandb={"project": "p", "offline": False})).close()
"""


def test_online_without_an_api_key_falls_back_naming_wandb_login(tmp_path):
    # in a fresh process: wandb keeps the credentials an earlier test's WANDB_API_KEY gave it for the session
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), AnswersEverything)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "WANDB_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}",
           "PYTHONPATH": str(Path(__file__).parent)}
    try:
        done = subprocess.run([sys.executable, "-c", NO_KEY_RUN, str(out)], env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    lines = notices(done.stderr)
    (run_dir,) = offline_runs(out)
    assert "no W&B API key" in lines[0] and "`wandb login`" in lines[0] and "WANDB_API_KEY" in lines[0]
    assert f"wandb sync {run_dir}" in lines[0]


def test_offline_run_gets_the_guide_names_per_step_and_ends_with_the_sync_command(tmp_path, capfd):
    out = tmp_path / "out"
    out.mkdir()
    log = MetricsLog(out, tiny_config(out, wandb={"project": "p", "offline": True, "group": "g", "tags": ["a"]}))
    batch_keys = {"reward_mean", "reward_std", "per_env", "error_rate/Timeout"}  # what the orchestrator wrote
    log.write({"step": 1, "reward_mean": 0.25, "reward_std": 0.5, "entropy": 1.5, "mismatch_kl": 0.01,
               "skipped": False, "per_env": {"x": {}}, "error_rate/Timeout": 0.125}, batch_keys=batch_keys)
    log.write({"step": 2, "reward_mean": 0.75, "reward_std": 0.25, "entropy": 1.25, "mismatch_kl": 0.02},
              batch_keys=batch_keys)
    log.close()
    (run_dir,) = offline_runs(out)
    steps = history(run_dir)
    assert [step for step, _ in steps] == [1, 2]
    first, second = steps[0][1], steps[1][1]
    assert (first["reward/mean"], first["reward/std"], first["policy/entropy"], first["policy/kl"]) == (0.25, 0.5, 1.5, 0.01)
    assert (second["reward/mean"], second["policy/kl"]) == (0.75, 0.02)
    assert "skipped" not in first and "per_env" not in first  # booleans and tables stay in metrics.jsonl
    # ours under the part that measured them, so that W&B groups them into sections beside the guide's four
    assert (first["orchestrator/reward_mean"], first["orchestrator/error_rate/Timeout"]) == (0.25, 0.125)
    assert (first["trainer/entropy"], first["trainer/mismatch_kl"]) == (1.5, 0.01)
    assert not [key for key in first if "/" not in key and not key.startswith("_")]
    lines = notices(capfd.readouterr().err)
    assert lines == [f"W&B: offline run saved in {run_dir}; upload it with: wandb sync {run_dir}"]
    assert run_config(run_dir)["wandb"]["group"] == "g"


def test_the_api_key_reaches_no_file_of_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"WANDB_API_KEY={SECRET}\n")
    out = tmp_path / "out"
    out.mkdir()
    config = tiny_config(out, wandb={"project": "p", "mode": "online"}, env_file=[str(secrets)])
    log = MetricsLog(out, config)
    log.write({"step": 1, "reward_mean": 0.5})
    log.close()
    (run_dir,) = offline_runs(out)
    assert run_config(run_dir)["env_file"] == [str(secrets)]  # the file's name, not its contents
    written = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.suffix == ".wandb" for path in written)
    assert [path for path in written if SECRET.encode() in path.read_bytes()] == []


def test_configured_but_not_installed_names_the_extra(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)  # import fails
    log = MetricsLog(tmp_path, tiny_config(tmp_path, wandb={"project": "p"}))
    log.write({"step": 1})
    log.close()
    err = capsys.readouterr().err
    assert "wandb is not installed" in err and "pip install 'prime-cli[wandb]'" in err
    assert (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "wandb").exists()


def test_a_wandb_that_cannot_start_leaves_the_run_going(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("WANDB_BASE_URL", "")  # wandb's own settings refuse it, even offline
    log = MetricsLog(tmp_path, tiny_config(tmp_path, wandb={"project": "p"}))
    log.write({"step": 1, "reward_mean": 0.5})
    log.close()
    lines = notices(capfd.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("W&B: wandb could not start (ValidationError")
    assert "metrics go to metrics.jsonl only" in lines[0]
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1
