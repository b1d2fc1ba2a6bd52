"""The guides' first baseline finishes (issue 54, item 1): `prime env init`'s template caps the reply length;
`-m local` gets a reply cap and a per-call timeout fitted to the embedded model (said in --help and in the
run header; -t and --timeout win); a retry says so on the terminal; and a plain run in which nothing finishes
prints a heartbeat line. All through the installed `prime` against scripted servers."""

from __future__ import annotations

import re

from tests.cli.conftest import metadata, record_local_server, run_dirs
from tests.support.cli import REPO, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

CHAT = "/v1/chat/completions"
# An environment that sets no max_tokens (no pyproject, no sampling args): only the -m local cap bounds it.
UNCAPPED_ENV = '''
import prime_cli.envs as vf


def load_environment():
    rows = [{"question": w, "answer": w[::-1]} for w in ["alpha", "bravo"]]
    return vf.SingleTurnEnv(eval_dataset=rows, system_prompt="Reverse the word.",
                            rubric=vf.Rubric(funcs=[lambda completion, answer: 1.0]))
'''


def rambling_server(**kwargs) -> ScriptedOpenAIServer:
    """A server that never stops generating (here: sends no reply until the test ends) unless the request
    caps the reply with max_tokens, as SmolLM2 at temperature 1 rambles toward its 4096-token context."""
    def fault_for(body: dict) -> str | None:
        capped = body.get("max_tokens") or body.get("max_completion_tokens")
        return None if capped else "timeout"

    return ScriptedOpenAIServer(fault_for=fault_for, timeout_delay=60, **kwargs)


def uncapped_env(root) -> None:
    folder = root / "environments" / "uncapped"
    folder.mkdir(parents=True)
    (folder / "uncapped.py").write_text(UNCAPPED_ENV)


def test_env_init_template_caps_the_reply_so_the_first_baseline_finishes(tmp_path):
    assert run_prime(["env", "init", "my-env"], tmp_path).returncode == 0
    with rambling_server() as server:
        result = run_prime(["eval", "run", "my-env", "-m", "scripted-model", "-b", server.url, "-n", "3", "-r", "2",
                            "-s", "--timeout", "2", "--max-retries", "0"], tmp_path, timeout=60)
        requests = server.requests_to(CHAT)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert len(requests) == 6 and all(isinstance(r["json"].get("max_tokens"), int) for r in requests)
    assert metadata(run_dirs(tmp_path)[0])["sampling_args"]["max_tokens"] == requests[0]["json"]["max_tokens"]


def test_local_model_gets_a_reply_cap_and_a_shorter_timeout_said_in_the_header(tmp_path):
    uncapped_env(tmp_path)
    from prime_cli.serve.embedded import EMBEDDED_NAME

    server = rambling_server(models=[EMBEDDED_NAME]).start()
    try:
        env = record_local_server(tmp_path / "cache", server)
        result = run_prime(["eval", "run", "uncapped", "-n", "2", "-r", "1", "-s"], tmp_path, env, timeout=60)
        requests = server.requests_to(CHAT)
    finally:
        server.stop()
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert [r["json"].get("max_tokens") for r in requests] == [512, 512]
    header = result.stdout.splitlines()[:3]
    [limits] = [line for line in header if "max_tokens 512" in line]
    assert "timeout 300s" in limits and "-m local" in limits and "-t" in limits and "--timeout" in limits
    assert metadata(run_dirs(tmp_path / "environments")[0])["sampling_args"]["max_tokens"] == 512


def test_explicit_max_tokens_and_timeout_win_over_the_local_defaults(tmp_path):
    uncapped_env(tmp_path)
    from prime_cli.serve.embedded import EMBEDDED_NAME

    with rambling_server(models=[EMBEDDED_NAME]) as server:
        env = record_local_server(tmp_path / "cache", server)
        result = run_prime(["eval", "run", "uncapped", "-n", "2", "-r", "1", "-t", "64", "--timeout", "45"],
                           tmp_path, env, timeout=60)
        requests = server.requests_to(CHAT)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    assert [r["json"].get("max_tokens") for r in requests] == [64, 64]
    [limits] = [line for line in result.stdout.splitlines()[:3] if "max_tokens 64" in line]
    assert "timeout 45s" in limits and "300" not in limits and "512" not in limits


def test_help_names_the_local_defaults():
    result = run_prime(["eval", "run", "--help"], REPO)
    text = " ".join(result.stdout.split())
    assert re.search(r"-m local.{0,80}512", text), text
    assert re.search(r"Default 600, 300 for -m local", text), text


def test_a_timeout_and_a_retry_each_print_one_warning_line(tmp_path):
    with ScriptedOpenAIServer(faults=["timeout", "500"], timeout_delay=30) as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", server.url, "-n", "1",
                            "-r", "1", "-c", "1", "--timeout", "1"], tmp_path, timeout=60)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, result.stderr
    assert "no reply within 1s" in warnings[0] and "--timeout" in warnings[0] and "retry 1/3" in warnings[0]
    assert "HTTP 500" in warnings[1] and "retry 2/3" in warnings[1]


def test_plain_output_prints_a_heartbeat_while_nothing_finishes(tmp_path):
    with ScriptedOpenAIServer(delay=3.0) as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", server.url, "-n", "2",
                            "-r", "2"], tmp_path, {"PRIME_EVAL_HEARTBEAT_SECONDS": "0.5"}, timeout=60)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    lines = result.stdout.splitlines()
    first_progress = next(i for i, line in enumerate(lines) if re.search(r"\[[1-9]\d*/4 ", line))
    beats = [line for line in lines[:first_progress] if "in flight" in line]
    assert beats, result.stdout
    assert "4 rollouts in flight" in beats[0] and "examples 0, 1" in beats[0] and "since" in beats[0], beats[0]
    assert re.search(r"since \d\d:\d\d:\d\d", beats[0]), beats[0]
