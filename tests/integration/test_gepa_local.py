"""`prime gepa run` on the real local model (vLLM + SmolLM2, student and reflection: `-m local -M local`).

reverse-text with `answer_without_tags` scores SmolLM2's plain reply by its similarity to the reversed
text, so the 135M model gets partial credit (about 0.15) that a better prompt can raise; on wordle it
scores 0 (it never writes a <guess> tag). The budget is the smallest that searches on both sides of a
Ctrl-C whatever the first proposal gives (a seed pass of 3 rows and one minibatch row, then one proposal
on one row before the signal, and at least one after the resume) and replies are bounded (48 tokens a reply, 200 for a reflection): each
proposal is a reflection of up to 200 tokens, 15-50 s on 2 CPU cores, so one fewer saves that.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from prime_cli.records.gepa_run import read_gepa_run
from tests.evals.cli_support import prime_env
from tests.support.cli import run_shell

from .conftest import REPO

ARGS = ["reverse-text", "-a", '{"answer_without_tags": true}', "-m", "local", "-M", "local", "-n", "6", "-N", "3",
        "--minibatch-size", "1", "-t", "48",
        "--reflection-sampling-args", '{"max_tokens": 200}', "--json"]
# 13: after the first commit (5 calls, or 8 when the child won its minibatch and was validated) the budget
# must still launch a proposal, whose reflection (15-50 s) the Ctrl-C lands in; a launch needs its minibatch
# rollouts (2) and the validation of its child (3) left beside the spend, so 8 + 5. At 6 a first child that
# won its minibatch spent the budget and the run completed before the signal (exit 0: a flaky test)
BUDGET = 13
THREE_FILES = ("best_prompt.txt", "pareto_frontier.jsonl", "metadata.json")


def gepa(args: list[str], cache) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "prime_cli", "gepa", "run", *args], cwd=REPO,
                            env=prime_env({"PRIME_CACHE_DIR": str(cache)}), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def check_run(run_dir, status: str) -> dict:
    for name in THREE_FILES:
        assert (run_dir / name).is_file(), name
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["status"] == status and metadata["model"] == "SmolLM2-135M-Instruct"
    assert metadata["config"]["model"] == "local"  # saved as given, so that a resume finds the local server
    read_gepa_run(run_dir)
    return metadata


def test_sigint_half_way_then_the_printed_resume_command_finishes_and_never_loses_the_best(
        local_server, prime_cache, tmp_path):
    # one run covers both checks (the suite shares 2 CPU cores): interrupted once the seed is scored and
    # the first proposal committed, then resumed verbatim to the end of the budget
    run_dir = tmp_path / "gepa"
    proc = gepa([*ARGS, "-B", str(BUDGET), "-o", str(run_dir)], prime_cache)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if '"event": "iteration"' in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]
    assert f"using the local server at {local_server.url}" in err
    check_run(run_dir, "cancelled")
    first = events("".join(lines) + out)
    assert first[0]["event"] == "start"
    progress = [e for e in first if e["event"] == "progress"]
    assert progress and progress[-1]["seed_done"] == progress[-1]["seed_total"] == 3
    done = first[-1]
    assert done["event"] == "done" and done["status"] == "cancelled"

    resumed = run_shell(done["resume_command"], REPO, {"PRIME_CACHE_DIR": str(prime_cache)}, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metadata = check_run(run_dir, "completed")
    # never past the budget, and short of it by less than one proposal and its child's validation (2 + 3)
    calls = metadata["total_metric_calls"]
    assert calls <= BUDGET and (calls > BUDGET - 5 or metadata["stop_reason"])
    iterations = [json.loads(x) for x in (run_dir / "iterations.jsonl").read_text().splitlines()]
    assert [it["iteration"] for it in iterations] == list(range(1, len(iterations) + 1))
    best = [e["best_score"] for e in first if e["event"] == "iteration"]
    assert best and best == sorted(best)  # the best score never goes down...
    assert metadata["best_score"] >= done["best_score"] >= metadata["seed_val_score"]  # ...nor across the resume
    assert metadata["seed_val_score"] > 0  # partial credit: there is something for GEPA to improve on
