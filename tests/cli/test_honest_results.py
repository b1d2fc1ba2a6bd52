"""Honest results: retries are counted, too many errored rollouts end "completed with errors" (exit 1),
and every command `prime` prints for the user to paste works when pasted as it is."""

from __future__ import annotations

import json
from pathlib import Path

from tests.gepa import support as gepa_support
from tests.support.cli import TerminalSession, run_prime, run_shell
from tests.support.scripted_server import ScriptedOpenAIServer

from .conftest import metadata, run_dirs

KEY = "sk-honest-4b1d"


def printed(stdout: str, label: str) -> str:
    """The command printed after `label` (e.g. 'Resume with: '), exactly as shown."""
    lines = [line for line in stdout.splitlines() if line.startswith(label)]
    assert len(lines) == 1, stdout
    return lines[0][len(label):]


def rows_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def test_retries_are_counted_by_kind_in_the_summary_and_metadata(tmp_path):
    faults = ["500", "429", "ok", "drop", "ok", "garbage", "ok", "timeout", "ok"]
    with ScriptedOpenAIServer(faults=faults, timeout_delay=3.0) as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "4", "-r", "1", "-c", "1",
                            "-s", "--timeout", "1"], tmp_path)
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(tmp_path)
    retries = metadata(run_dir)["retries"]
    assert retries == {"calls_retried": 4, "retries": 5, "gave_up": 0,
                       "by_kind": {"429": 1, "5xx": 1, "timeout": 1, "connection": 1, "malformed": 1}}
    assert "Retries: 5 retries of 4 model calls (429: 1, 5xx: 1, timeout: 1, connection: 1, malformed: 1)" \
        in result.stdout


def test_too_many_errors_end_completed_with_errors_and_the_printed_retry_command_fixes_them(tmp_path):
    with ScriptedOpenAIServer(faults=["500"] * 3) as server:
        first = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "4", "-r", "2", "-s",
                           "--max-retries", "0", "-c", "1"], tmp_path)
        assert first.returncode == 1, (first.stdout, first.stderr)
        (run_dir,) = run_dirs(tmp_path)
        meta = metadata(run_dir)
        assert meta["status"] == "completed_with_errors"
        assert meta["error_budget"] == {"max_error_rate": 0.1, "error_rate": 0.375, "errored_rollouts": 3,
                                        "rollouts": 8, "exceeded": True}
        assert "Eval completed with errors" in first.stdout
        with TerminalSession(["eval", "tui"], tmp_path) as term:  # the browser shows the status
            row = [line for line in term.wait_for(" errors ").splitlines() if run_dir.name in line]
            term.send("q")
            assert term.wait_exit() == 0
        assert len(row) == 1 and " errors " in row[0]
        assert "Error budget: 3 of 8 rollouts (37.5%) errored, above --max-error-rate 10.0%" in first.stdout
        command = printed(first.stdout, "Retry errors with: ")
        assert f"--retry-errors {run_dir.resolve()}" in command and f"-b {server.url}" in command
        again = run_shell(command, tmp_path)  # the server has used up its faults: every retry succeeds
        assert again.returncode == 0, (again.stdout, again.stderr)
        assert len(server.requests_to("/v1/chat/completions")) == 8 + 3
    assert metadata(run_dir)["status"] == "completed"
    assert [r for r in rows_of(run_dir) if r["error"]] == []


def test_max_error_rate_flag_and_toml_key(tmp_path):
    with ScriptedOpenAIServer(faults=["500"] * 3) as server:
        tolerant = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "4", "-r", "2", "-s",
                              "--max-retries", "0", "-c", "1", "--max-error-rate", "0.5", "-o", "flag"], tmp_path)
    assert tolerant.returncode == 0, tolerant.stderr
    (run_dir,) = run_dirs(tmp_path / "flag")
    assert metadata(run_dir)["status"] == "completed" and metadata(run_dir)["error_budget"]["exceeded"] is False
    assert "--retry-errors" in printed(tolerant.stdout, "Retry errors with: ")  # still offered
    with ScriptedOpenAIServer(faults=["500"] * 2) as server:
        config = tmp_path / "evals.toml"
        config.write_text(f'model = "m"\nbase_url = "{server.url}"\nsave_results = true\nmax_retries = 0\n'
                          f'max_concurrent = 1\noutput_dir = "toml"\nmax_error_rate = 0.2\n'
                          '[[eval]]\nenv_id = "reverse-text"\nnum_examples = 4\nrollouts_per_example = 2\n')
        strict = run_prime(["eval", "run", str(config)], tmp_path)
    assert strict.returncode == 1 and "above --max-error-rate 20.0%" in strict.stdout
    bad = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", "http://127.0.0.1:9/v1", "--max-error-rate", "2"],
                    tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "--max-error-rate" in bad.stderr


def test_resume_without_a_value_skips_runs_completed_with_errors(tmp_path):
    with ScriptedOpenAIServer(api_key=KEY) as locked:
        failed = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", locked.url, "-k", "HONEST_KEY", "-n", "3",
                            "-r", "1", "-s"], tmp_path, {"HONEST_KEY": "wrong-key"})
    assert failed.returncode == 2 and "rejected the API key" in failed.stderr
    (failed_dir,) = run_dirs(tmp_path)
    assert metadata(failed_dir)["status"] == "failed"
    with ScriptedOpenAIServer(faults=["500"] * 3) as flaky:
        errors = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", flaky.url, "-n", "3", "-r", "1", "-s",
                            "--max-retries", "0"], tmp_path)
    assert errors.returncode == 1
    (errors_dir,) = [d for d in run_dirs(tmp_path) if d != failed_dir]
    with ScriptedOpenAIServer() as healthy:
        # the key variable comes from the failed run's metadata (-k HONEST_KEY), so it must be set
        resumed = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", healthy.url, "-R"], tmp_path,
                            {"HONEST_KEY": "any"})
    assert resumed.returncode == 0, resumed.stderr
    assert metadata(failed_dir)["status"] == "completed" and len(rows_of(failed_dir)) == 3
    assert metadata(errors_dir)["status"] == "completed_with_errors"


def test_printed_resume_command_carries_e_k_and_headers(tmp_path):
    registry = tmp_path / "endpoints.toml"
    with ScriptedOpenAIServer(api_key=KEY) as server:
        registry.write_text(f'[[endpoint]]\nendpoint_id = "honest"\nmodel = "m"\nurl = "{server.url}"\n')
        first = run_prime(["eval", "run", "reverse-text", "-m", "honest", "-e", "endpoints.toml", "-k", "HONEST_KEY",
                           "--header", "X-Team: evals", "-n", "3", "-r", "1", "-s"], tmp_path, {"HONEST_KEY": "wrong"})
        assert first.returncode == 2, first.stderr
        command = printed(first.stdout, "Resume with: ")
        assert f"-e {registry.resolve()}" in command and "-k HONEST_KEY" in command
        resumed = run_shell(command, tmp_path / "..", {"HONEST_KEY": KEY})  # pasted anywhere: paths are absolute
        assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
        teams = {r["headers"].get("x-team") for r in server.requests_to("/v1/chat/completions")}
    (run_dir,) = run_dirs(tmp_path)
    assert metadata(run_dir)["status"] == "completed" and len(rows_of(run_dir)) == 3
    assert teams == {"evals"}


def gepa_reply(body):
    if body["model"] == "reflector":
        return gepa_support.reflector_reply(body["messages"], None, None)
    return gepa_support.student_reply(body["messages"], None, None)


def test_gepa_printed_commands_work_when_pasted(tmp_path):
    gepa_support.write_toy_env(tmp_path)
    with ScriptedOpenAIServer(gepa_reply, api_key=KEY) as student, \
            ScriptedOpenAIServer(gepa_reply, api_key=KEY, models=["nobody"]) as reflection:
        (tmp_path / "endpoints.toml").write_text(
            f'[[endpoint]]\nendpoint_id = "stu"\nmodel = "student"\nurl = "{student.url}"\n')
        env = {"GEPA_KEY": KEY}
        first = run_prime(["gepa", "run", "toy-gepa", "-m", "stu", "-e", "endpoints.toml", "-k", "GEPA_KEY",
                           "-M", "reflector", "--reflection-base-url", reflection.url, "-B", "40", "-n", "20",
                           "-N", "10"], tmp_path, env)
        assert first.returncode == 1, (first.stdout, first.stderr)
        use_it = printed(first.stdout, "Use it: ")
        used = run_shell(use_it, tmp_path, env)
        assert used.returncode == 0, (use_it, used.stdout, used.stderr)
        reflection.models = None  # the reflection model is served from now on
        resume = printed(first.stdout, "Resume with: ")
        assert resume.startswith("prime gepa run toy-gepa -R "), resume  # the saved config supplies -e/-k/-M/-B
        resumed = run_shell(resume, tmp_path, env)
        assert resumed.returncode == 0, (resume, resumed.stdout, resumed.stderr)
    (run_dir,) = [d for d in run_dirs(tmp_path) if "gepa" in d.parts]
    meta = metadata(run_dir)
    assert meta["status"] == "completed" and meta["max_calls"] == 40 and meta["num_candidates"] > 1
