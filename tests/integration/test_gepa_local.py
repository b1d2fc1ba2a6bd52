"""`prime gepa run` on the local model with a small budget writes every file of its run directory.

Reflections are capped at 16 tokens to keep the test short: SmolLM2 rarely closes a fenced prompt
anyway, so proposals are mostly rejected as truncated, which is a path worth exercising too."""

from __future__ import annotations

import json
import subprocess
import sys

from prime_cli.gepa.reader import read_gepa_run
from tests.evals.cli_support import prime_env

from .conftest import REPO


def test_gepa_small_budget_on_the_local_model(local_server, prime_cache, tmp_path):
    run_dir = tmp_path / "gepa"
    args = ["gepa", "run", "reverse-text", "-m", "local", "-B", "16", "-n", "4", "-N", "4", "--minibatch-size", "2",
            "-S", '{"max_tokens": 64}', "--reflection-sampling-args", '{"max_tokens": 16}', "-o", str(run_dir),
            "--plain"]
    done = subprocess.run([sys.executable, "-m", "prime_cli", *args], cwd=REPO, capture_output=True, text=True,
                          env=prime_env({"PRIME_CACHE_DIR": str(prime_cache)}), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"using the local server at {local_server.url}" in done.stderr
    for name in ("metadata.json", "candidates.jsonl", "iterations.jsonl", "pareto_frontier.jsonl",
                 "best_prompt.txt", "system_prompt.txt", "state.json"):
        assert (run_dir / name).is_file(), name
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["status"] == "completed" and metadata["model"] == "SmolLM2-135M-Instruct"
    assert 0 < metadata["total_metric_calls"] <= 16 + 4  # never past the budget by more than one validation pass
    run = read_gepa_run(run_dir)
    assert run.candidates and run.candidates[0].parent_idx is None
    assert (run_dir / "best_prompt.txt").read_text() == (run_dir / "system_prompt.txt").read_text()
