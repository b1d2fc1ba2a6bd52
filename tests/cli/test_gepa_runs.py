"""`prime gepa run` as a user lives it: sampling like `prime eval run`, progress from the start, timeouts
said out loud, Ctrl-C / kill / fatal errors leaving a resumable folder, resume keeping the saved config.

Every run is the installed `prime` script against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from prime_cli.records.gepa_run import read_gepa_run
from tests.cli.conftest import one_error_line, record_local_server
from tests.gepa import support
from tests.support.cli import PRIME, TerminalSession, prime_env, run_prime, run_shell
from tests.support.scripted_server import ScriptedOpenAIServer

SEED = "Answer the question."
BASE = ["gepa", "run", "toy-gepa", "-n", "20", "-N", "6"]


def reply(body):
    if body["model"] == "reflector":
        return support.reflector_reply(body["messages"], None, None)
    return support.student_reply(body["messages"], None, None)


def toy(root: Path, max_tokens: int | None = None) -> None:
    support.write_toy_env(root)
    if max_tokens is not None:
        (root / "environments" / "toy_gepa" / "pyproject.toml").write_text(
            f'[project]\nname = "toy-gepa"\nversion = "0.1"\n\n[tool.prime.eval]\nmax_tokens = {max_tokens}\n')


def meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text())


def model_requests(server: ScriptedOpenAIServer, model: str) -> list[dict]:
    return [r["json"] for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == model]


def resume_line(stdout: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith("Resume with: ")]
    assert len(lines) == 1, stdout[-3000:]
    return lines[0].removeprefix("Resume with: ")


def consistent(run_dir: Path, status: str) -> None:
    """The design card's three files, the state to resume from, and a readable run."""
    assert meta(run_dir)["status"] == status
    assert (run_dir / "best_prompt.txt").read_text()
    assert (run_dir / "pareto_frontier.jsonl").is_file() and (run_dir / "state.json").is_file()
    read_gepa_run(run_dir)


def start(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([str(PRIME), *args], cwd=cwd, env=prime_env(extra_env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def read_until(proc: subprocess.Popen, needle: str, limit: float = 60) -> str:
    """stdout lines until one contains `needle` (the process keeps running)."""
    seen = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"{needle!r} never printed; stdout: {''.join(seen)[-2000:]} stderr: {proc.stderr.read()[-2000:]}")


# -- 1. sampling as `prime eval run` ----------------------------------------------------------------

def test_student_gets_the_environments_max_tokens_and_reflection_its_own(tmp_path):
    toy(tmp_path, max_tokens=77)
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--plain"],
                           tmp_path)
        students, reflections = model_requests(server, "student"), model_requests(server, "reflector")
    assert result.returncode == 0, result.stderr
    assert students and {r.get("max_tokens") for r in students} == {77}
    assert reflections and all(r.get("max_tokens") == 1024 for r in reflections)


def test_t_and_s_override_the_environment_as_in_eval(tmp_path):
    toy(tmp_path, max_tokens=77)
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--plain",
                            "-t", "33", "-S", '{"top_p": 0.5}', "--reflection-sampling-args", '{"max_tokens": 99}'],
                           tmp_path)
        students, reflections = model_requests(server, "student"), model_requests(server, "reflector")
    assert result.returncode == 0, result.stderr
    assert {(r.get("max_tokens"), r.get("top_p")) for r in students} == {(33, 0.5)}
    assert {r.get("max_tokens") for r in reflections} == {99}


# -- 2. progress from the start ----------------------------------------------------------------------

def test_plain_progress_covers_the_seed_validation_then_each_iteration(tmp_path):
    toy(tmp_path)
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--plain"],
                           tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    first = out.index("validating the seed prompt: 0/6 rollouts")
    done = out.index("validating the seed prompt: 6/6 rollouts")
    assert first < done < out.index("iteration 1:")
    seed_line = out[done:].splitlines()[0]
    assert "best so far (seed) 0.0000" in seed_line and "rollouts/s" in seed_line and "ETA" in seed_line


def test_json_events_from_start_to_done(tmp_path):
    toy(tmp_path)
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--json"],
                           tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and "iteration" in kinds
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["seed_done"] == progress[-1]["seed_total"] == 6
    assert kinds.index("progress") < kinds.index("iteration")
    done = events[-1]
    assert done["status"] == "completed" and done["best_prompt"] and done["total_metric_calls"] >= 18
    assert "stop_reason" in done and done["stop_reason"] is None  # the budget ended it
    assert all(e["env_id"] == "toy-gepa" for e in events)


def test_live_panel_shows_the_seed_validation_and_ctrl_c_there_leaves_a_resumable_run(tmp_path):
    """Ctrl-C while the seed prompt is being scored drains (the one Ctrl-C policy, runs/interrupt.py): the
    seed's validation and the proposals in flight finish and commit, nothing new starts; status cancelled,
    best_prompt.txt is the best committed candidate's, and a resume command that finishes the run when pasted."""
    toy(tmp_path)
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(reply, delay=0.3) as server:
        args = [*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "-c", "1", "-o", str(run_dir)]
        with TerminalSession(args, tmp_path) as term:
            screen = term.wait_for("validating the seed prompt: 2/6 rollouts", "rollouts/s", "ETA")
            assert "best so far (seed)" in screen and "budget" in screen
            term.send("\x03")
            assert term.wait_exit(timeout=30) == 1
            output = term.raw.decode(errors="replace")
        consistent(run_dir, "cancelled")
        assert "cancelling: waiting for" in output
        lines = [json.loads(line) for line in (run_dir / "candidates.jsonl").read_text().splitlines()]
        assert lines[0]["system_prompt"] == SEED and len(lines[0]["val_scores"]) == 6  # the seed was scored to the end
        best = max(lines, key=lambda line: line["val_mean"])
        assert (run_dir / "best_prompt.txt").read_text() == best["system_prompt"]
        assert (run_dir / "pareto_frontier.jsonl").read_text() != ""
        drained = len((run_dir / "iterations.jsonl").read_text().splitlines())
        command = " ".join(resume_line(output.replace("\r", "")).split())
        assert command == f"prime gepa run toy-gepa -R {run_dir}"
        server.delay = 0  # slow replies only to catch the seed validation on screen; the resume needs none
        resumed = run_shell(command, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    consistent(run_dir, "completed")
    assert meta(run_dir)["total_metric_calls"] >= 18
    assert len((run_dir / "iterations.jsonl").read_text().splitlines()) >= drained


# -- 3. timeouts -----------------------------------------------------------------------------------

def test_a_timed_out_request_is_retried_and_said_on_stderr(tmp_path):
    toy(tmp_path)
    with ScriptedOpenAIServer(reply, faults=["timeout"], timeout_delay=5) as server:
        result = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--plain",
                            "--timeout", "1"], tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.stderr
    assert "no reply within 1s (--timeout)" in warnings[0] and "still be generating" in warnings[0]
    assert "retry (1/3) starts the request again from scratch" in warnings[0]


# -- 4. Ctrl-C, fatal error, SIGKILL ----------------------------------------------------------------

def test_ctrl_c_mid_search_prints_a_resume_command_that_works_pasted(tmp_path):
    toy(tmp_path)
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(reply, delay=0.05) as server:
        proc = start([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "40", "--plain", "-c", "2",
                      "-o", str(run_dir)], tmp_path)
        before = read_until(proc, "iteration 1:")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        consistent(run_dir, "cancelled")
        assert "GEPA cancelled" in out and "Traceback" not in err
        server.delay = 0  # slow replies only so that the signal lands mid-search
        resumed = run_shell(resume_line(before + out), tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    consistent(run_dir, "completed")
    iterations = [json.loads(line) for line in (run_dir / "iterations.jsonl").read_text().splitlines()]
    assert [it["iteration"] for it in iterations] == list(range(1, len(iterations) + 1))
    # to the end of the budget, never past it: short by less than one proposal and its child's validation (6 + 6)
    assert meta(run_dir)["max_calls"] == 40 and 40 - 12 < meta(run_dir)["total_metric_calls"] <= 40


def test_fatal_error_during_the_seed_validation_leaves_a_failed_resumable_run(tmp_path):
    toy(tmp_path)
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(reply, models=["reflector"]) as server:  # the student is not served: HTTP 404
        result = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--plain",
                            "-o", str(run_dir)], tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and "student" in result.stderr
    consistent(run_dir, "failed")
    assert (run_dir / "best_prompt.txt").read_text() == SEED and meta(run_dir)["error"]
    command = resume_line(result.stdout)
    with ScriptedOpenAIServer(reply) as fixed:  # served again, elsewhere: -b may change on resume
        resumed = run_shell(f"{command} -b {fixed.url}", tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    consistent(run_dir, "completed")


def test_sigkill_leaves_a_loadable_folder_that_resumes(tmp_path):
    toy(tmp_path)
    run_dir = tmp_path / "run"
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(reply, delay=0.05) as server:
        local = record_local_server(cache, server)  # `-m local` is this server, as with a running `prime serve`
        proc = start([*BASE, "-m", "local", "-M", "reflector", "--reflection-base-url", server.url, "-B", "40",
                      "--plain", "-c", "2", "-o", str(run_dir)], tmp_path, local)
        read_until(proc, "iteration 2:")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        run = read_gepa_run(run_dir)
        assert run.metadata["status"] == "running" and run.candidates
        assert meta(run_dir)["config"]["model"] == "local"
        server.delay = 0  # slow replies only so that the kill lands mid-search
        resumed = run_prime(["gepa", "run", "-R", str(run_dir), "--plain"], tmp_path, local)
    assert resumed.returncode == 0, resumed.stderr
    consistent(run_dir, "completed")
    assert 40 - 12 < meta(run_dir)["total_metric_calls"] <= 40  # short by less than a proposal and a validation


# -- 5. resume keeps the saved config --------------------------------------------------------------

def test_resume_uses_the_saved_config_and_refuses_a_differing_flag(tmp_path):
    toy(tmp_path)
    run_dir = tmp_path / "run"
    with ScriptedOpenAIServer(reply) as server:
        first = run_prime([*BASE, "-m", "student", "-M", "reflector", "-b", server.url, "-B", "18", "--plain",
                           "--minibatch-size", "2", "-o", str(run_dir)], tmp_path)
        assert first.returncode == 0, first.stderr
        saved = json.dumps(meta(run_dir)["config"], sort_keys=True)
        reflections = len(model_requests(server, "reflector"))
        refused = {flag: run_prime(["gepa", "run", "-R", str(run_dir), *args], tmp_path)
                   for flag, args in {"-M/--reflection-model": ["-M", "other"], "-B/--max-calls": ["-B", "10"],
                                      "--minibatch-size": ["--minibatch-size", "3"],
                                      "-S/-t/-T": ["-t", "12"]}.items()}
        unchanged = json.dumps(meta(run_dir)["config"], sort_keys=True)
        larger = run_prime(["gepa", "run", "toy-gepa", "-o", str(run_dir), "-B", "30", "--plain"], tmp_path)
    for flag, result in refused.items():
        one_error_line(result, flag, str(run_dir))
    assert unchanged == saved
    assert larger.returncode == 0, larger.stderr
    config = meta(run_dir)["config"]
    assert config["reflection_model"] == "reflector" and config["base_url"] == server.url
    assert config["minibatch_size"] == 2 and meta(run_dir)["max_calls"] == 30
    assert len(model_requests(server, "reflector")) > reflections  # the saved reflection model went on
