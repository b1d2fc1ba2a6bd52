"""gsm8k: boxed answers checked by math-verify, data loading, and a CLI run on a scripted server."""

import json

import gsm8k
import pytest

import prime_cli.envs as vf
from tests.environments.conftest import data_root
from tests.evals.cli_support import only_run_dir, read_rows, run_prime
from tests.support.scripted_client import ScriptedClient
from tests.support.scripted_server import ScriptedOpenAIServer


@pytest.fixture
def env():
    return vf.load_environment("gsm8k", data_dir=str(data_root() / "gsm8k"), num_eval_examples=4)


async def score(env, reply):
    row = env.get_eval_dataset()[0]
    return (await env.run_group(ScriptedClient([reply]), "m", row, n=1))[0], row


@pytest.mark.parametrize("reply, correct, formatted", [
    ("16 - 3 - 4 = 9 eggs, 9 * 2 = 18. \\boxed{18}", 1.0, 1.0),
    ("\\boxed{18.00}", 1.0, 1.0),
    ("\\boxed{\\$18}", 1.0, 1.0),
    ("\\boxed{36/2}", 1.0, 1.0),
    ("\\boxed{19}", 0.0, 1.0),
    ("The answer is 18.", 0.0, 0.0),  # right number, no box: malformed
    ("\\boxed{18", 0.0, 0.0),  # unclosed box
    ("first \\boxed{3} then \\boxed{18}", 1.0, 0.0),  # the last box counts; two boxes is bad format
])
async def test_rewards_on_right_wrong_and_malformed_answers(env, reply, correct, formatted):
    state, row = await score(env, reply)
    assert row["answer"] == "18"
    assert state["metrics"] == {"correct_answer": correct, "boxed_format": formatted}
    assert state["reward"] == pytest.approx(correct + 0.2 * formatted)


def test_boxed_extraction_handles_nested_braces():
    assert gsm8k.last_boxed("x \\boxed{\\frac{1}{2}} y") == "\\frac{1}{2}"
    assert gsm8k.boxed_contents("\\boxed{a}\\boxed{b{c}}") == ["a", "b{c}"]
    assert gsm8k.last_boxed("no box") is None


def test_math_equal_is_a_math_check_not_string_equality():
    assert gsm8k.math_equal("1000", "1,000") and gsm8k.math_equal("0.5", "\\frac{1}{2}")
    assert not gsm8k.math_equal("1000", "100") and not gsm8k.math_equal("5", "")
    assert not gsm8k.math_equal("5", "9" * 500)  # absurdly long answers are rejected before sympy


def test_splits_come_from_train_and_test_files():
    env = vf.load_environment("gsm8k", data_dir=str(data_root() / "gsm8k"), num_train_examples=7)
    assert len(env.get_dataset()) == 7
    first_test = json.loads((data_root() / "gsm8k" / "test.jsonl").read_text().splitlines()[0])
    assert env.get_eval_dataset()[0]["question"].strip() == first_test["question"].strip()
    assert env.get_eval_dataset()[0]["info"]["solution"] == first_test["answer"]


def test_prime_data_dir_is_used_when_no_data_dir_is_given(monkeypatch):
    monkeypatch.setenv("PRIME_DATA_DIR", str(data_root()))  # holds gsm8k/
    env = vf.load_environment("gsm8k", num_eval_examples=2)
    assert len(env.get_eval_dataset()) == 2


def test_missing_data_says_how_to_point_at_it(monkeypatch, tmp_path):
    monkeypatch.delenv("PRIME_DATA_DIR", raising=False)
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)  # as if datasets were not installed
    with pytest.raises(vf.EnvConfigError, match="data_dir.*PRIME_DATA_DIR"):
        vf.load_environment("gsm8k")
    with pytest.raises(vf.EnvConfigError, match="neither train.jsonl nor test.jsonl"):
        vf.load_environment("gsm8k", data_dir=str(tmp_path))


def test_a_broken_jsonl_line_is_named(tmp_path):
    (tmp_path / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n{not json\n')
    env = vf.load_environment("gsm8k", data_dir=str(tmp_path))
    with pytest.raises(vf.DatasetError, match=r"test.jsonl:2 is not valid JSON"):
        env.get_eval_dataset()


def test_eval_run_end_to_end_on_a_scripted_server(tmp_path):
    answers = {}
    for line in (data_root() / "gsm8k" / "test.jsonl").read_text().splitlines()[:5]:
        record = json.loads(line)
        answers[record["question"].strip()] = gsm8k.final_number(record["answer"])

    def reply(request):
        question = request["messages"][-1]["content"].strip()
        return f"Working... so the answer is \\boxed{{{answers[question]}}}." if question in answers else "no idea"

    with ScriptedOpenAIServer(reply) as server:
        result = run_prime(["eval", "run", "gsm8k", "-m", "m", "-b", server.url, "-n", "5", "-r", "2", "-s"],
                           tmp_path, {"PRIME_DATA_DIR": str(data_root())})
    assert result.returncode == 0, result.stderr
    rows = read_rows(only_run_dir(tmp_path))
    assert len(rows) == 10 and all(r["reward"] == pytest.approx(1.2) for r in rows)
