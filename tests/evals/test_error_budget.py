"""`--max-error-rate` stops a run whose endpoint is broken instead of paying for every rollout: once 20
rollouts have finished and the error rate is clearly over the budget, the run stops `failed`, names the
first errors, and `--retry-errors DIR` finishes it (the errored rollouts and those never run). Through the
installed `prime`, against the scripted server's fault injection."""

import json

from prime_cli.evals.health import budget_stop_reason
from tests.evals.cli_support import only_run_dir, pairs, read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

BASE = ["eval", "run", "reverse-text", "-m", "m", "-n", "60", "-r", "2", "-c", "2", "-s", "--max-retries", "0"]


def test_a_broken_endpoint_stops_the_run_early_and_retry_errors_finishes_it(tmp_path):
    with ScriptedOpenAIServer(fault_rate=1.0, fault_kinds=["500"]) as broken:
        result = run_prime([*BASE, "-b", broken.url], tmp_path)
        calls = len(broken.requests_to("/v1/chat/completions"))
    assert result.returncode == 1, result.stderr
    assert 20 <= calls <= 24, calls  # 20 rollouts and what was in flight, not 120
    err = result.stderr
    assert "error budget exceeded" in err and "above --max-error-rate 10.0%" in err, err
    assert "first errors:" in err and "500" in err, err
    assert "Traceback" not in err
    run_dir = only_run_dir(tmp_path)
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "failed" and meta["error_budget"]["exceeded"] is True
    assert len(read_rows(run_dir)) == calls  # every finished rollout saved, errored
    retry = [line for line in result.stdout.splitlines() if line.startswith("Retry errors with: ")]
    assert len(retry) == 1 and f"--retry-errors {run_dir.resolve()}" in retry[0], result.stdout
    with ScriptedOpenAIServer() as healthy:
        command = retry[0].removeprefix("Retry errors with: ").replace(broken.url, healthy.url).split()
        again = run_prime(command[1:], tmp_path)
        assert len(healthy.requests_to("/v1/chat/completions")) == 120  # each rollout once: errored + never run
    assert again.returncode == 0, again.stderr
    rows = read_rows(run_dir)
    assert pairs(rows) == sorted((e, i) for e in range(60) for i in range(2))
    assert not any(r["error"] for r in rows)
    assert json.loads((run_dir / "metadata.json").read_text())["status"] == "completed"


def test_an_endpoint_failing_a_little_under_the_budget_runs_to_the_end(tmp_path):
    faults = (["500"] + ["ok"] * 11) * 10  # 1 in 12 calls fails: 8.3%, under the 10% budget
    with ScriptedOpenAIServer(faults=faults) as flaky:
        result = run_prime([*BASE, "-b", flaky.url], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = read_rows(only_run_dir(tmp_path))
    assert len(rows) == 120 and sum(1 for r in rows if r["error"]) == 10


def test_the_rule_waits_for_20_rollouts_and_for_clear_evidence():
    assert budget_stop_reason(errored=19, finished=19, max_error_rate=0.1) is None  # too few to judge
    assert budget_stop_reason(errored=20, finished=20, max_error_rate=0.1) is not None  # all failed
    assert budget_stop_reason(errored=3, finished=20, max_error_rate=0.1) is None  # 15%, but could be luck
    assert budget_stop_reason(errored=30, finished=200, max_error_rate=0.1) is not None  # 15% over 200: clear
    assert budget_stop_reason(errored=200, finished=200, max_error_rate=1.0) is None  # a budget of 100% never stops
