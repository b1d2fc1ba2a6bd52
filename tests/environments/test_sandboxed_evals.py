"""Sandboxed environments end to end through the installed `prime eval run`, against a scripted
OpenAI-compatible server that answers with tool calls: math-python (honest Python, then a boxed
answer) and the fix-bug example, under bwrap (and podman when its provider is part of prime);
`--sandbox none` says "unsandboxed"; an unavailable provider is one line and exit 2."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

import prime_cli.envs as vf
from prime_cli.sandbox import get_provider
from tests.cli.conftest import metadata, one_error_line, run_dirs
from tests.environments.conftest import data_root
from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

BWRAP = get_provider("bwrap").unavailable_reason()
pytestmark = pytest.mark.skipif(BWRAP is not None, reason=f"bwrap cannot run here: {BWRAP}")
DATA = {"PRIME_DATA_DIR": str(data_root())}


def podman_reason() -> str | None:
    if importlib.util.find_spec("prime_cli.sandbox.containers") is None:
        return "the podman provider (prime_cli/sandbox/containers.py) is not part of prime yet"
    return get_provider("podman").unavailable_reason()


def call(name: str, arguments: dict) -> dict:
    return {"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def math_server() -> ScriptedOpenAIServer:
    """Runs honest Python that computes the reference (looked up by question), then boxes what it printed."""
    env = vf.load_environment("math-python", data_dir=str(data_root() / "gsm8k"))
    answers = {row["prompt"][-1]["content"]: row["answer"] for row in env.get_eval_dataset()}

    def reply(request):
        messages = request["messages"]
        tools = [m for m in messages if m.get("role") == "tool"]
        if not tools:
            question = [m for m in messages if m.get("role") == "user"][-1]["content"]
            return call("python", {"code": f"import sympy, numpy\nanswer = sympy.Integer({answers[question]})\nprint(answer)"})
        return f"The tool printed it: \\boxed{{{tools[-1]['content'].strip()}}}"

    return ScriptedOpenAIServer(reply=reply)


def eval_args(env_id: str, url: str, *extra: str) -> list[str]:
    return ["eval", "run", env_id, "-m", "scripted", "-b", url, *extra]


def rewards(run_dir) -> list[float]:
    return [json.loads(line)["reward"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("provider", ["bwrap", "podman"])
def test_math_python_end_to_end(tmp_path, provider):
    if provider == "podman" and (reason := podman_reason()):
        pytest.skip(reason)
    with math_server() as server:
        result = run_prime([*eval_args("math-python", server.url, "-n", "3", "-r", "2", "-s"),
                            *(["--sandbox", provider] if provider != "bwrap" else [])], tmp_path, extra_env=DATA)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"Sandboxes: {provider} 6 started, 0 failed, start p50 " in result.stdout
    run_dir, = run_dirs(tmp_path)
    assert rewards(run_dir) == [1.0] * 6
    sandbox = metadata(run_dir)["sandbox"]
    assert sandbox["provider"] == provider and sandbox["isolated"] is True
    assert sandbox["started"] == 6 and sandbox["failed"] == 0 and 0 < sandbox["start_p50_s"] <= sandbox["start_p95_s"]


def fix_bug_server(fixes: bool) -> ScriptedOpenAIServer:
    """Reads the repository, then (when `fixes`) fixes it with the row's own sed command through bash."""
    from fix_bug.repos import REPOS

    def reply(request):
        messages = request["messages"]
        done = [m for m in messages if m.get("role") == "tool"]
        question = [m for m in messages if m.get("role") == "user"][-1]["content"]
        repo = next(r for r in REPOS if f"({r['name']})" in question)
        if not done:
            return call("bash", {"command": "cd repo && ls -R && cat *.py"})
        if fixes and len(done) == 1:
            return call("bash", {"command": f"cd repo && {repo['fix']} && python3 test_*.py || {repo['fix']}"})
        return "Done."

    return ScriptedOpenAIServer(reply=reply)


@pytest.mark.parametrize("provider", ["bwrap", "podman"])
def test_fix_bug_end_to_end_a_fix_gets_1_and_doing_nothing_gets_0(tmp_path, provider):
    if provider == "podman" and (reason := podman_reason()):
        pytest.skip(reason)
    flags = ["--sandbox", provider] if provider != "bwrap" else []
    for fixes, expected in ((True, 1.0), (False, 0.0)):
        out = tmp_path / str(fixes)
        out.mkdir()
        with fix_bug_server(fixes) as server:
            result = run_prime([*eval_args("fix-bug", server.url, "-n", "4", "-r", "1", "-s"), *flags], out)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        run_dir, = run_dirs(out)
        assert rewards(run_dir) == [expected] * 4, result.stdout[-3000:]
        assert metadata(run_dir)["sandbox"]["started"] == 4


def test_sandbox_none_says_unsandboxed(tmp_path):
    with math_server() as server:
        result = run_prime([*eval_args("math-python", server.url, "-n", "1", "-r", "1", "-s"), "--sandbox", "none"],
                           tmp_path, extra_env=DATA)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--sandbox none: model-written code runs unsandboxed" in result.stdout
    assert "Sandboxes: none (unsandboxed) 1 started, 0 failed" in result.stdout
    run_dir, = run_dirs(tmp_path)
    sandbox = metadata(run_dir)["sandbox"]
    assert sandbox["provider"] == "none" and sandbox["isolated"] is False and sandbox["note"] == "unsandboxed"
    assert rewards(run_dir) == [1.0]


def test_prime_sandbox_variable_picks_the_provider(tmp_path):
    with math_server() as server:
        result = run_prime(eval_args("math-python", server.url, "-n", "1", "-r", "1"), tmp_path,
                           extra_env={**DATA, "PRIME_SANDBOX": "none"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Sandboxes: none (unsandboxed) 1 started" in result.stdout


def test_missing_bubblewrap_is_one_line_and_exit_2_with_nothing_written(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH without bwrap
    bin_dir.mkdir()
    result = run_prime(eval_args("math-python", "http://127.0.0.1:9/v1", "-s"), tmp_path,
                       extra_env={**DATA, "PATH": str(bin_dir)})
    one_error_line(result, "math-python runs model-written code in a sandbox", "apt-get install bubblewrap")
    assert list(tmp_path.iterdir()) == [bin_dir]


def test_an_unavailable_provider_is_one_line_and_exit_2(tmp_path):
    bin_dir = tmp_path / "bin"  # bwrap is there, podman is not
    bin_dir.mkdir()
    (bin_dir / "bwrap").symlink_to(shutil.which("bwrap"))
    result = run_prime([*eval_args("math-python", "http://127.0.0.1:9/v1", "-s"), "--sandbox", "podman"], tmp_path,
                       extra_env={**DATA, "PATH": str(bin_dir)})
    one_error_line(result, "math-python runs model-written code in a sandbox", "podman")
    assert list(tmp_path.iterdir()) == [bin_dir]


def test_an_unknown_provider_is_one_line_and_exit_2(tmp_path):
    result = run_prime(eval_args("math-python", "http://127.0.0.1:9/v1", "--sandbox", "lxc"), tmp_path, extra_env=DATA)
    one_error_line(result, "--sandbox", "bwrap, podman, docker, none")
