"""pass^k (all k rollouts pass) beside pass@k: the estimator, the summary (screen, metadata.json, --json),
`prime eval compare` and the TUI overview, on runs whose passes are known by construction."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest

from prime_cli.results.pass_k import pass_at_k, pass_hat_k
from prime_cli.results.summary import metadata_fields, summarize
from tests.evals.cli_support import read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer, content_text
from tests.tui.fixtures import write_eval_run


def brute_pass_hat_k(n, c, k):
    """Fraction of all k-subsets of n samples (c of them passing) in which every sample passes."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(all(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_hat_k_matches_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_hat_k(n, c, k) == pytest.approx(brute_pass_hat_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_hat_k_edge_values():
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)  # C(2,2)/C(4,2)
    assert pass_hat_k(4, 2, 1) == pytest.approx(0.5) == pass_at_k(4, 2, 1)  # k = 1: both are the pass rate
    assert pass_hat_k(4, 4, 4) == 1.0 and pass_hat_k(4, 3, 4) == 0.0 and pass_hat_k(10, 0, 1) == 0.0
    assert 0.0 < pass_hat_k(1000, 999, 500) < 1.0  # large n stays finite
    for bad in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_hat_k(*bad)


def hand_built_rows():
    """Example 0: 4 of 4 pass; example 1: 2 of 4; example 2: 0 of 4 (rewards 1.0 / 0.0, threshold 1.0)."""
    passes = {0: 4, 1: 2, 2: 0}
    return [{"example_id": e, "rollout_idx": k, "reward": 1.0 if k < c else 0.0, "error": None}
            for e, c in passes.items() for k in range(4)]


# per example: pass^2 = 1, 1/6, 0; pass^4 = 1, 0, 0; pass@2 = 1, 5/6, 0; pass@4 = 1, 1, 0
PASS_HAT = {"1": 1 / 2, "2": (1 + 1 / 6) / 3, "4": 1 / 3}
PASS_AT = {"1": 1 / 2, "2": (1 + 5 / 6) / 3, "4": 2 / 3}


def test_the_summary_gives_pass_hat_k_beside_pass_at_k_with_intervals():
    from prime_cli.evals.summary_view import summary_text

    s = summarize(hand_built_rows())
    assert s["pass_hat_k"] == pytest.approx(PASS_HAT) and s["pass_at_k"] == pytest.approx(PASS_AT)
    ci = s["ci95"]["pass_hat_k"]
    assert set(ci) == {"1", "2", "4"} and ci["2"]["mean"] == pytest.approx(7 / 18)
    assert ci["2"]["examples"] == 3 and ci["2"]["low"] < 7 / 18 < ci["2"]["high"]
    fields = metadata_fields(s)
    assert fields["pass_hat_k"] == s["pass_hat_k"] and "pass_hat_k" not in fields["summary"]
    assert fields["summary"]["ci95"]["pass_hat_k"]["4"]["mean"] == pytest.approx(1 / 3)
    text = summary_text(s)
    line = next(line for line in text.splitlines() if line.startswith("pass^k: "))
    assert line.startswith("pass^k: pass^1=0.500 [") and "pass^2=0.389 [" in line and "pass^4=0.333 [" in line


def test_errored_rollouts_are_left_out_of_pass_hat_k_as_of_pass_at_k():
    rows = hand_built_rows()
    # example 1 gets two more rollouts that errored: left out (n stays 4), never counted as fails
    rows += [{"example_id": 1, "rollout_idx": k, "reward": None, "error": {"type": "ModelError", "message": "500"}}
             for k in (4, 5)]
    s = summarize(rows)
    assert s["pass_hat_k"] == pytest.approx(PASS_HAT) and s["pass_at_k"] == pytest.approx(PASS_AT)
    # an example left with fewer scored rollouts than k is not in that k (the k's stop at the fewest)
    rows[4]["error"] = "ModelError: 500"  # example 1 now has 3 scored rollouts: 1 pass, 2 fails
    s = summarize(rows)
    assert list(s["pass_hat_k"]) == ["1", "2"]
    assert s["pass_hat_k"]["2"] == pytest.approx((1 + 0 + 0) / 3)  # C(1,2) = 0 for example 1


# -- through the CLI ---------------------------------------------------------------------------------

PASS_ENV = '''
import prime_cli.envs as vf

WORDS = ["apple", "rivers", "stone"]


def load_environment():
    rows = [{"question": f"say {w}", "answer": w} for w in WORDS]

    def exact(completion, answer) -> float:
        return 1.0 if completion and completion[-1]["content"].strip() == answer else 0.0

    return vf.SingleTurnEnv(dataset=rows, eval_dataset=rows, rubric=vf.Rubric(funcs=[exact]))
'''


def write_env(root: Path) -> None:
    folder = root / "environments" / "toy_passes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy_passes.py").write_text(PASS_ENV)


def replies(right: dict[str, int]):
    """The right word on the first `right[word]` calls for that word, a wrong one after."""
    seen: dict[str, int] = {}

    def reply(body):
        word = content_text(body["messages"][-1]["content"]).split()[-1]
        seen[word] = seen.get(word, 0) + 1
        return word if seen[word] <= right[word] else "nope"

    return reply


def eval_run(root: Path, right: dict[str, int], *extra: str):
    with ScriptedOpenAIServer(reply=replies(right)) as server:
        done = run_prime(["eval", "run", "toy-passes", "-m", "m", "-b", server.url, "-n", "3", "-r", "4", "-s",
                          *extra], root)
    assert done.returncode == 0, done.stderr
    return done


def test_eval_run_prints_and_saves_pass_hat_k(tmp_path):
    write_env(tmp_path)
    done = eval_run(tmp_path, {"apple": 4, "rivers": 2, "stone": 0})
    assert "pass^1=0.500" in done.stdout and "pass^2=0.389" in done.stdout and "pass^4=0.333" in done.stdout
    assert "pass@2=0.611" in done.stdout and "pass@4=0.667" in done.stdout
    run_dir = next(tmp_path.rglob("metadata.json")).parent
    assert sorted((r["example_id"], r["reward"]) for r in read_rows(run_dir)).count((1, 1.0)) == 2
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["pass_hat_k"] == pytest.approx(PASS_HAT) and meta["pass_at_k"] == pytest.approx(PASS_AT)
    assert meta["summary"]["ci95"]["pass_hat_k"]["2"]["mean"] == pytest.approx(7 / 18)
    assert Fraction(meta["pass_hat_k"]["2"]).limit_denominator(100) == Fraction(7, 18)


def test_eval_run_json_carries_pass_hat_k(tmp_path):
    write_env(tmp_path)
    done = eval_run(tmp_path, {"apple": 4, "rivers": 2, "stone": 0}, "--json")
    event = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][-1]
    assert event["event"] == "done"
    assert event["summary"]["pass_hat_k"] == pytest.approx(PASS_HAT)
    assert event["summary"]["ci95"]["pass_hat_k"]["4"]["mean"] == pytest.approx(1 / 3)


def test_compare_gives_the_paired_pass_hat_k_difference(tmp_path):
    # A: the hand-built passes; B: every example passes 3 of 4 (pass^2 = 1/2, pass^4 = 0 each)
    a_rows = hand_built_rows()
    b_rows = [{**row, "reward": 1.0 if row["rollout_idx"] < 3 else 0.0} for row in a_rows]
    filled = [{"prompt": [], "completion": [], "answer": "", "task": "t", "info": {}, "metrics": {}, "timing": {},
               "is_completed": True, "is_truncated": False, "stop_condition": "done", "token_usage": None}]
    a = write_eval_run(tmp_path / "a", [filled[0] | row for row in a_rows])
    b = write_eval_run(tmp_path / "b", [filled[0] | row for row in b_rows], model="m-b")
    done = run_prime(["eval", "compare", str(a), str(b), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    hat = result["pass_hat_k"]
    assert set(hat) == {"1", "2", "4"}
    # per example B - A: pass^2: 1/2 - 1, 1/2 - 1/6, 1/2 - 0; pass^4: -1, 0, 0
    assert hat["2"]["difference"] == pytest.approx((-1 / 2 + 1 / 3 + 1 / 2) / 3)
    assert hat["4"]["difference"] == pytest.approx(-1 / 3) and hat["4"]["examples"] == 3
    assert result["pass_at_k"]["1"]["difference"] == pytest.approx(0.75 - 0.5)
    text = run_prime(["eval", "compare", str(a), str(b)], tmp_path).stdout
    assert "pass@1 (= pass^1): +0.250" in text
    line = next(line for line in text.splitlines() if line.startswith("pass@4: "))
    assert "; pass^4: -0.333 [" in line
