"""`prime env check` and judge rubrics, through the installed `prime` against a real HTTP server: with no -m
the judge is skipped with a note and nothing is sent; with `-m judge -b URL` the judge scores the scripted
replies like every other reward function; a judge that fails is a problem line; bad -m/-b is one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

JUDGE_ARGS = ["-a", '{"sound": true, "judge": true}']
CHAT = "/v1/chat/completions"


def fair_judge(request: dict[str, Any]) -> str:
    """'yes' only when the graded response is the reference answer (the default judge prompt's layout)."""
    text = request["messages"][-1]["content"]
    found = re.search(r"Reference answer:\n(.*?)\n\nResponse to grade:\n(.*?)\n\nDoes the response", text, re.S)
    assert found, text
    return "yes" if found[1].strip() == found[2].strip() else "no"


def check(workspace: Path, *args: str, extra_env: dict[str, str] | None = None):
    return run_prime(["env", "check", "toy-check", *JUDGE_ARGS, *args], cwd=workspace, extra_env=extra_env)


def problem_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("problem: ")]


def test_without_m_the_judge_is_skipped_and_nothing_is_sent(workspace):
    with ScriptedOpenAIServer(fair_judge) as server:
        # the openai SDK's own defaults point at the server: a judge called anyway would reach it
        result = check(workspace, extra_env={"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"})
        assert server.requests == []
    assert result.returncode == 0, result.stdout + result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert any("judged" in n and "skipped" in n and "-m MODEL" in n for n in notes), result.stdout


def test_with_m_the_judge_scores_the_replies(workspace):
    with ScriptedOpenAIServer(fair_judge) as server:
        result = check(workspace, "-m", "judge", "-b", server.url, "--json")
        judged = server.requests_to(CHAT)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["skipped"] == [], report
    assert report["table"]["judged"]["reference"] == 1.0
    for kind in ("empty", "other_answer", "prefix", "echo", "repetition"):
        assert report["table"]["judged"][kind] in (0.0, None), (kind, report["table"]["judged"])
    assert report["table"]["judged"]["other_answer"] == 0.0
    assert judged and all(r["json"]["model"] == "judge" for r in judged), judged[:1]
    assert "Reference answer:" in judged[0]["json"]["messages"][-1]["content"]


def test_with_m_the_table_shows_the_judge(workspace):
    with ScriptedOpenAIServer(fair_judge) as server:
        result = check(workspace, "-m", "judge", "-b", server.url, "-n", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("judged"))
    assert "1.00" in row and "skipped" not in row, result.stdout
    assert "skipped" not in result.stdout and result.stdout.rstrip().splitlines()[-1].startswith("ok:")


def test_a_judge_that_fails_is_a_problem_line(workspace):
    with ScriptedOpenAIServer(fair_judge, fault_rate=1.0, fault_kinds=["500"]) as server:
        result = check(workspace, "-m", "judge", "-b", server.url, "--max-retries", "0", "-n", "3")
        assert server.requests_to(CHAT)
    assert result.returncode == 1, result.stdout + result.stderr
    problems = problem_lines(result.stdout)
    assert any(p.startswith("problem: judged raised on") and "500" in p for p in problems), result.stdout
    # the failed judge is not read as a judge that pays nothing
    assert not any("never exceeds 0" in p for p in problems), problems
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("args", [["-m", "judge", "-b", "localhost:8000"], ["-m", "nosuch"],
                                  ["-m", "judge", "-b", "http://127.0.0.1:9/v1", "--max-retries", "-1"]])
def test_bad_model_flags_are_one_error_line(workspace, args):
    result = check(workspace, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert args[-2] in lines[0] or args[-1] in lines[0], lines
