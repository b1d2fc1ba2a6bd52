"""Bad input is found before anything costs time or money: before the embedded local model is started
(no `local model:` line) and before any request reaches a model server. `-R DIR` and
`--retry-errors DIR` take the model, URL, key variable and sampling arguments from the run itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.conftest import metadata, one_error_line, run_dirs, snapshot
from tests.evals.cli_support import popen_prime, read_rows
from tests.support.cli import PRIME, prime_env, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

LOCAL_MARK = "local model:"


def run_until_local_model(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None
                          ) -> subprocess.CompletedProcess:
    """`prime ARGS`, stopped at once if it starts the local model (its first `local model:` line), so a
    failing test never waits for vLLM. Returns what it printed up to then."""
    proc = subprocess.Popen([str(PRIME), *args], cwd=cwd, env=prime_env(extra_env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    err_lines = []
    for line in proc.stderr:  # type: ignore[union-attr]
        err_lines.append(line)
        if LOCAL_MARK in line:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    out = proc.stdout.read()  # type: ignore[union-attr]
    proc.wait(timeout=60)
    proc.stderr.close()  # type: ignore[union-attr]
    proc.stdout.close()  # type: ignore[union-attr]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(err_lines))


NO_KEYS = {"OPENAI_API_KEY": "", "PRIME_UNSET_KEY_VAR": ""}

BAD_EVAL_INPUT = {
    "typed env arg": (["-a", '{"num_train_examples": "abc"}'], ["num_train_examples", "int"]),
    "unknown env arg": (["-a", '{"num_examples": 3}'], ["num_examples"]),
    "unknown -x attribute": (["-x", '{"no_such_attr": 3}'], ["no_such_attr"]),
    "key instead of -k name": (["-k", "sk-abc123"], ["-k"]),
    "unset -k variable": (["-k", "PRIME_UNSET_KEY_VAR"], ["PRIME_UNSET_KEY_VAR"]),
    "missing -R folder": (["-R", "no-such-run"], ["-R", "no-such-run"]),
    "missing --retry-errors folder": (["--retry-errors", "no-such-run"], ["--retry-errors", "no-such-run"]),
    "no run to resume": (["-R"], ["-R", "no unfinished run"]),
    "missing endpoint registry": (["-e", "nowhere.toml"], ["nowhere.toml"]),
}


@pytest.mark.parametrize("case", list(BAD_EVAL_INPUT))
def test_eval_with_the_default_model_checks_input_before_starting_it(case, tmp_path):
    extra, needles = BAD_EVAL_INPUT[case]
    result = run_until_local_model(["eval", "run", "reverse-text", "-n", "1", "-r", "1", *extra], tmp_path, NO_KEYS)
    assert LOCAL_MARK not in result.stderr
    one_error_line(result, *needles)
    assert not (tmp_path / "outputs").exists()


BAD_GEPA_INPUT = {
    "typed env arg": (["-a", '{"max_words": "many"}'], ["max_words", "int"]),
    "unknown env arg": (["-a", '{"num_examples": 3}'], ["num_examples"]),
    "reflection model without a key": (["-M", "gpt-4.1-mni"], ["OPENAI_API_KEY"]),
    "reflection registry missing": (["-M", "reflector", "-e", "nowhere.toml"], ["nowhere.toml"]),
    "key instead of -k name": (["-M", "reflector", "--reflection-base-url", "http://127.0.0.1:9/v1", "-k", "sk-abc123"],
                               ["-k"]),
    "bad reflection URL": (["-M", "reflector", "--reflection-base-url", "localhost:9"], ["-b", "localhost:9"]),
    "budget below one pass": (["-B", "3"], ["--max-calls 3"]),
}


@pytest.mark.parametrize("case", list(BAD_GEPA_INPUT))
def test_gepa_with_the_default_model_checks_input_before_starting_it(case, tmp_path):
    extra, needles = BAD_GEPA_INPUT[case]
    result = run_until_local_model(["gepa", "run", "reverse-text", "-n", "4", "-N", "2", "--plain", *extra],
                                   tmp_path, NO_KEYS)
    assert LOCAL_MARK not in result.stderr
    one_error_line(result, *needles)
    assert not (tmp_path / "outputs").exists()


def test_gepa_run_dir_of_an_eval_run_is_refused_before_the_local_model(saved_eval):
    [run_dir] = run_dirs(saved_eval)
    before = snapshot(run_dir)
    result = run_until_local_model(["gepa", "run", "reverse-text", "-o", str(run_dir)], saved_eval)
    assert LOCAL_MARK not in result.stderr
    one_error_line(result, "eval run")
    assert snapshot(run_dir) == before


def test_bad_input_sends_no_request_to_the_server(tmp_path):
    with ScriptedOpenAIServer() as server:
        base = ["-m", "student", "-b", server.url]
        one_error_line(run_prime(["eval", "run", "reverse-text", *base, "-a", '{"num_eval_examples": "abc"}'],
                                 tmp_path), "num_eval_examples")
        one_error_line(run_prime(["gepa", "run", "reverse-text", *base, "-M", "reflector", "-k", "PRIME_UNSET_KEY_VAR",
                                  "-n", "4", "-N", "2"], tmp_path, NO_KEYS), "PRIME_UNSET_KEY_VAR")
        one_error_line(run_prime(["gepa", "run", "reverse-text", *base, "-a", '{"seed": [1]}', "-n", "4", "-N", "2"],
                                 tmp_path), "seed")
        assert server.requests == []
    assert not any(tmp_path.rglob("metadata.json"))


def _cancelled_run(server, tmp_path: Path) -> Path:
    """A reverse-text run made with -m/-b/-k/-T/-t, stopped by Ctrl-C after its first results."""
    args = ["eval", "run", "reverse-text", "-m", "student", "-b", server.url, "-k", "SCRIPTED_KEY", "-T", "0.25",
            "-t", "77", "-n", "12", "-r", "2", "-c", "2", "-s"]
    proc = popen_prime(args, tmp_path, {"SCRIPTED_KEY": "sk-scripted-1"})
    while not any(p.read_text().strip() for p in tmp_path.rglob("results.jsonl")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    [run_dir] = run_dirs(tmp_path)
    assert metadata(run_dir)["status"] == "cancelled"
    resume_line = next(line for line in out.splitlines() if line.startswith("Resume with: "))
    assert resume_line.startswith("Resume with: prime eval run reverse-text ") and resume_line.endswith(f" -R {run_dir}")
    return run_dir


def test_resume_with_only_the_run_folder_uses_the_runs_model_url_key_and_sampling(tmp_path):
    with ScriptedOpenAIServer(api_key="sk-scripted-1", delay=0.05) as server:
        run_dir = _cancelled_run(server, tmp_path)
        done_before = len(read_rows(run_dir))
        sent_before = len(server.requests)
        resumed = run_until_local_model(["eval", "run", "reverse-text", "-R", str(run_dir)], tmp_path,
                                        {"SCRIPTED_KEY": "sk-scripted-1"})
        assert resumed.returncode == 0, resumed.stderr
        new = server.requests_to("/v1/chat/completions")[sent_before:]
    assert LOCAL_MARK not in resumed.stderr
    assert metadata(run_dir)["status"] == "completed"
    rows = read_rows(run_dir)
    assert sorted((r["example_id"], r["rollout_idx"]) for r in rows) == [(e, i) for e in range(12) for i in range(2)]
    assert len(new) == 24 - done_before
    assert {(r["json"]["model"], r["json"]["temperature"], r["json"]["max_tokens"]) for r in new} == {("student", 0.25, 77)}


def test_resume_with_a_different_model_than_the_runs_is_one_error(tmp_path):
    with ScriptedOpenAIServer(api_key="sk-scripted-1", delay=0.05) as server:
        run_dir = _cancelled_run(server, tmp_path)
        before, sent = snapshot(run_dir), len(server.requests)
        result = run_until_local_model(["eval", "run", "reverse-text", "-m", "other-model", "-R", str(run_dir)],
                                       tmp_path, {"SCRIPTED_KEY": "sk-scripted-1"})
        one_error_line(result, "other-model", "student")
        assert len(server.requests) == sent
    assert snapshot(run_dir) == before


def test_retry_errors_with_only_the_run_folder(tmp_path):
    with ScriptedOpenAIServer(faults=["500"] * 3 + ["ok"] * 100) as server:
        first = run_prime(["eval", "run", "reverse-text", "-m", "student", "-b", server.url, "-n", "4", "-r", "2", "-s",
                           "--max-retries", "0", "-c", "1", "--max-error-rate", "0.5"], tmp_path)
        assert first.returncode == 0, first.stderr
        [run_dir] = run_dirs(tmp_path)
        assert sum(1 for r in read_rows(run_dir) if r["error"]) == 3
        again = run_until_local_model(["eval", "run", "reverse-text", "--retry-errors", str(run_dir)], tmp_path)
    assert LOCAL_MARK not in again.stderr
    assert again.returncode == 0, again.stderr
    rows = read_rows(run_dir)
    assert len(rows) == 8 and not any(r["error"] for r in rows)


def test_resume_of_a_local_model_run_goes_back_to_the_local_model(tmp_path):
    """A run made with `-m local` recorded the server of that session, which is gone: -R starts the local model
    again instead of calling the dead URL."""
    run_dir = tmp_path / "outputs" / "evals" / "reverse-text--SmolLM2-135M-Instruct" / "20250101-000000-000000"
    run_dir.mkdir(parents=True)
    (run_dir / "metadata.json").write_text(json.dumps({
        "env_id": "reverse-text", "env_args": {}, "model": "SmolLM2-135M-Instruct", "local_model": True,
        "base_url": "http://127.0.0.1:9/v1", "num_examples": 2, "rollouts_per_example": 1, "sampling_args": {},
        "status": "cancelled"}))
    (run_dir / "results.jsonl").write_text("")
    result = run_until_local_model(["eval", "run", "reverse-text", "-R", str(run_dir)], tmp_path)
    assert LOCAL_MARK in result.stderr, result.stderr


def test_reflection_model_close_to_an_endpoint_id_is_named_as_a_typo(tmp_path):
    registry = tmp_path / "endpoints.toml"
    registry.write_text('[[endpoint]]\nendpoint_id = "judge-large"\nmodel = "judge"\n'
                        'url = "http://127.0.0.1:9/v1"\nkey = "PRIME_UNSET_KEY_VAR"\n')
    result = run_until_local_model(["gepa", "run", "reverse-text", "-M", "judge-lrage", "-e", str(registry)],
                                   tmp_path, NO_KEYS)
    assert LOCAL_MARK not in result.stderr
    one_error_line(result, "reflection model -M judge-lrage", "OPENAI_API_KEY", "did you mean 'judge-large'")
