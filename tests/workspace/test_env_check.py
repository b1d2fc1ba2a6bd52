"""`prime env check` through the installed `prime`: planted reward and format bugs are named and fail the
check (exit 1), a sound environment passes (exit 0), `--json` holds the same, bad input is one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_prime

TOY = '''
import prime_cli.envs as vf

WORDS = ["alphabetical", "breakfasting", "candlelights", "dragonflies", "everlasting", "fingerprints"]


def load_environment(sound: bool = False, judge: bool = False, broken_turn: bool = False, mixed: bool = False,
                     bad_tool: bool = False, blank: str = ""):
    tag = "answer" if sound else "reversed_text"
    rows = [{"question": w, "answer": w[::-1]} for w in WORDS]
    if mixed:  # one answer a number
        rows[1]["answer"] = 7
    if blank:  # a row with an empty question, one with neither question nor prompt
        rows[0]["question"] = ""
        if blank == "missing":
            del rows[2]["question"]
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def exact(completion, answer, parser) -> float:
        return 1.0 if parser.parse_answer(completion) == answer else 0.0

    def starts_right(completion, answer, parser) -> float:
        """Pays any reply the answer starts with: a fragment is as good as the whole."""
        parsed = parser.parse_answer(completion)
        return 1.0 if parsed and answer.startswith(parsed) else 0.0

    funcs = [exact] if sound else [starts_right]
    if judge:
        rubric = vf.JudgeRubric(parser=parser)

        async def judged(judge, prompt, completion, answer, state) -> float:
            return 1.0 if (await judge(prompt, completion, answer, state)).startswith("yes") else 0.0

        rubric.add_reward_func(judged)
        for func in funcs:
            rubric.add_reward_func(func)
    else:
        rubric = vf.Rubric(funcs=funcs, parser=parser)
    rubric.add_reward_func(parser.get_format_reward_func(), weight=0.2)
    prompt = f"Reverse the word. Reply inside <{tag}> and </{tag}> tags."
    if broken_turn:
        class Broken(vf.MultiTurnEnv):
            async def env_response(self, messages, state):
                raise RuntimeError("no follow-up written yet")

        return Broken(eval_dataset=rows, system_prompt=prompt, parser=parser, rubric=rubric, max_turns=2)
    if bad_tool:
        def lookup(word: str) -> str:
            """Look a word up."""
            return word[::-1]

        env = vf.ToolEnv(tools=[lookup], eval_dataset=rows, system_prompt=prompt, parser=parser, rubric=rubric)
        env.oai_tools.append({"type": "function", "function": {
            "name": "look up", "parameters": {"type": "object", "properties": {"x": {}}, "required": ["y"]}}})
        return env
    return vf.SingleTurnEnv(eval_dataset=rows, system_prompt=prompt, parser=parser, rubric=rubric)
'''


def check(workspace: Path, *args: str):
    return run_prime(["env", "check", "toy-check", *args], cwd=workspace)


def problem_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("problem: ")]


def test_a_reward_that_pays_brevity_and_a_prompt_the_parser_does_not_read_fail(workspace):
    result = check(workspace)
    assert result.returncode == 1, result.stdout + result.stderr
    problems = problem_lines(result.stdout)
    assert any("starts_right" in p and "prefix" in p and "brevity is paid" in p for p in problems), problems
    assert any("<reversed_text>" in p and "<answer>" in p for p in problems), problems
    assert "Traceback" not in result.stderr


def test_a_sound_environment_passes(workspace):
    result = check(workspace, "-a", '{"sound": true}')
    assert result.returncode == 0, result.stdout + result.stderr
    assert problem_lines(result.stdout) == []
    assert "exact" in result.stdout and "format_reward" in result.stdout and "prefix" in result.stdout


def test_json_holds_the_table_and_the_problems(workspace):
    result = check(workspace, "--json", "-n", "4")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["examples"] == 4
    table = report["table"]
    assert set(table) == {"starts_right", "format_reward", "reward"}
    assert set(table["starts_right"]) == set(report["kinds"])
    # the planted reward pays a prefix as much as the reference, and nothing for an empty reply
    assert table["starts_right"]["prefix"] == table["starts_right"]["reference"] > 0
    assert table["starts_right"]["empty"] == 0
    assert table["reward"]["reference"] == pytest.approx(1.2)
    assert any("brevity is paid" in p for p in report["problems"])
    sound = json.loads(check(workspace, "--json", "-a", '{"sound": true}').stdout)
    assert sound["ok"] is True and sound["problems"] == []
    assert sound["table"]["exact"]["prefix"] == 0 and sound["table"]["exact"]["reference"] == 1


def test_a_judge_reward_is_skipped_with_a_line(workspace):
    result = check(workspace, "-a", '{"sound": true, "judge": true}')
    assert result.returncode == 0, result.stdout + result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert any("judged" in n and "skipped" in n for n in notes), result.stdout


def test_an_env_response_that_raises_on_a_scripted_turn_is_named(workspace):
    result = check(workspace, "-a", '{"sound": true, "broken_turn": true}')
    assert result.returncode == 1, result.stdout + result.stderr
    assert any("env_response" in p and "RuntimeError" in p for p in problem_lines(result.stdout)), result.stdout


def test_answers_of_mixed_types_are_named(workspace):
    result = check(workspace, "-a", '{"sound": true, "mixed": true}')
    assert result.returncode == 1, result.stdout + result.stderr
    problems = problem_lines(result.stdout)
    assert any("`answer` has mixed types" in p and "5 str" in p and "1 int" in p for p in problems), problems


def test_a_row_without_a_prompt_is_named(workspace):
    result = check(workspace, "-a", '{"sound": true, "blank": "empty"}')
    assert result.returncode == 1, result.stdout + result.stderr
    assert any("1 of 6 rows have no prompt text" in p for p in problem_lines(result.stdout)), result.stdout
    missing = check(workspace, "-a", '{"sound": true, "blank": "missing"}')
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert any("does not load" in p and "row 2" in p for p in problem_lines(missing.stdout)), missing.stdout


def test_tool_schemas_are_checked_and_a_scripted_tool_call_answered(workspace):
    result = check(workspace, "-a", '{"sound": true, "bad_tool": true}')
    assert result.returncode == 1, result.stdout + result.stderr
    problems = problem_lines(result.stdout)
    assert any("'look up'" in p and "name" in p for p in problems), problems
    assert any("look up" in p and "['y']" in p for p in problems), problems
    assert any("look up" in p and "['x']" in p and "no type" in p for p in problems), problems
    assert not any("lookup" in p.replace("look up", "") for p in problems), problems  # the sound tool passes
    assert "note: tool look up has no description" in result.stdout


@pytest.mark.parametrize("args", [["no-such-env"], ["toy-check", "-a", "{bad"], ["toy-check", "-a", "[1]"],
                                  ["toy-check", "-a", '{"nope": 1}'], ["toy-check", "-n", "0"]])
def test_bad_input_is_one_error_line(workspace, args):
    result = run_prime(["env", "check", *args], cwd=workspace)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
