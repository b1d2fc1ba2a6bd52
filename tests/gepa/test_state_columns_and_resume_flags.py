"""--state-columns the rollouts' state never has are said (issue 54, item 6); the flags a resume may change
are the same in the code, `prime gepa run --help` and docs/gepa.md (issue 54, item 7)."""

from __future__ import annotations

import json
import re

from tests.evals.cli_support import REPO, run_prime
from tests.gepa import support
from tests.gepa.test_gepa_cli import gepa, reply
from tests.support.scripted_server import ScriptedOpenAIServer


def test_state_columns_the_state_never_has_are_named_in_one_warning(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        result = gepa(tmp_path, server.url, "-B", "40", "--plain", "-o", str(tmp_path / "run"),
                      "--state-columns", "answer,guesses,stop_condtion")
    assert result.returncode == 0, result.stderr
    said = [line for line in (result.stdout + result.stderr).splitlines() if "--state-columns" in line]
    assert len(said) == 1, said
    line = said[0]
    assert "warning" in line and "'guesses'" in line and "'stop_condtion'" in line and "'answer'" not in line
    assert "did you mean 'stop_condition'?" in line
    # the run goes on, and the column the state has is shown to the reflection model
    rollouts = [json.loads(x) for x in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert all(r["record"]["state"] == {"answer": r["record"]["answer"]} for r in rollouts)


def test_state_columns_every_state_has_give_no_warning(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        result = gepa(tmp_path, server.url, "-B", "30", "--plain", "--state-columns", "answer")
    assert result.returncode == 0, result.stderr
    assert "--state-columns" not in result.stdout + result.stderr


def flags_in(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


def test_the_flags_a_resume_may_change_agree_in_the_code_the_help_and_the_guide():
    import typer.main

    from prime_cli.cli.gepa_cmd import gepa_app
    from prime_cli.gepa.api import CHANGEABLE_ON_RESUME
    from prime_cli.gepa.resume_rules import RESUME_FLAGS

    assert set(RESUME_FLAGS) == CHANGEABLE_ON_RESUME - {"run_dir"}
    expected = {flag for flags in RESUME_FLAGS.values() for flag in flags.split("/")} | {"-B"}
    group = typer.main.get_command(gepa_app)
    command = getattr(group, "commands", {}).get("run", group)  # one command: Typer makes it the group
    resume = next(p for p in command.params if p.name == "resume")
    assert flags_in(resume.help.split("except", 1)[1]) == expected
    guide = (REPO / "docs" / "gepa.md").read_text()
    paragraph = next(p for p in guide.split("\n- ") if p.startswith("`-R DIR`"))
    said = paragraph.split("except", 1)[1].split(". ", 1)[0]
    assert flags_in(said) == expected


def test_every_flag_said_to_be_changeable_on_resume_is_accepted(tmp_path):
    with ScriptedOpenAIServer(reply) as server:
        first = gepa(tmp_path, server.url, "-B", "30", "-o", str(tmp_path / "run"))
        support.write_toy_env(tmp_path)
        again = run_prime(["gepa", "run", "-R", str(tmp_path / "run"), "-B", "40", "-b", server.url,
                           "--reflection-base-url", server.url, "-c", "3", "--timeout", "50", "--max-retries", "2",
                           "--speculate", "1", "--max-reflection-failures", "5", "--num-test", "2", "--json"], tmp_path)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["status"] == "completed"
