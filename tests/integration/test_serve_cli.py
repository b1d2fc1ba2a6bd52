"""`prime serve` failure modes and `-m local` starting its own server, on the real vLLM."""

from __future__ import annotations

import re
import subprocess
import sys

from prime_cli.serve.server import free_port, served_models
from tests.evals.cli_support import only_run_dir, prime_env, read_rows

from .conftest import REPO, run_eval


def test_vllm_failing_to_start_is_one_clear_message_with_its_log(prime_cache):
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "prime_cli", "serve", "--port", str(port), "--max-model-len", "100000"],
                          cwd=REPO, env=prime_env({"PRIME_CACHE_DIR": str(prime_cache)}), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 2
    assert re.search(r"error: vLLM exited with code \d+ before it was ready", done.stderr)
    assert "100000" in done.stderr.split("before it was ready", 1)[1]  # vLLM's own complaint is shown
    assert "Traceback" not in done.stderr.split("Last lines of", 1)[0]
    assert not (prime_cache / "servers" / f"{port}.json").exists()


def test_local_model_without_a_server_starts_one_for_the_run_and_stops_it(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    from prime_cli.serve.paths import models_dir

    (cache / "models").symlink_to(models_dir(), target_is_directory=True)
    done = run_eval(["reverse-text", "-n", "2", "-r", "2", "-s", "-o", str(tmp_path / "out")], cache)
    assert done.returncode == 0, done.stderr[-3000:]
    port = int(re.search(r"starting vLLM for SmolLM2-135M-Instruct on port (\d+)", done.stderr).group(1))
    assert len(read_rows(only_run_dir(tmp_path / "out"))) == 4
    assert served_models(f"http://127.0.0.1:{port}/v1", timeout=1) is None  # stopped with the run
    leftover = subprocess.run(["pgrep", "-f", f"--port {port} "], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a vLLM process outlived the run"
