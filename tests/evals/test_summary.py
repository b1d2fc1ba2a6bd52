import itertools
import json
import math
import subprocess
import sys

import pytest

from prime_cli.results.pass_k import pass_at_k
from prime_cli.results.summary import RunningStats, metadata_fields, summarize


def brute_pass_at_k(n, c, k):
    """Fraction of all k-subsets of n samples (c of them passing) that hold at least one pass."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_edge_values():
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c < k
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert 0.0 < pass_at_k(1000, 1, 500) < 1.0  # large n stays finite
    for bad in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def make_rows():
    """Two examples x 4 rollouts, one task each. See the expected numbers in the tests below."""
    rewards = [1.0, 0.0, 1.0, None, 0.5, 1.0, 0.0, 0.0]
    rows = []
    for i, reward in enumerate(rewards):
        rows.append({
            "example_id": i // 4,
            "rollout_idx": i % 4,
            "task": "math" if i < 4 else "code",
            "reward": reward,
            "metrics": {"correct": [1, 0, 1, 0, 0, 1, 0, 0][i], **({"len": 10.0 * (i + 1)} if i < 4 else {})},
            "error": None,
            "metrics_errors": [],
            "stop_condition": "answered",
            "is_truncated": i in (2, 6),
            "timing": {"generation_ms": 100.0 * (i + 1) - 10, "scoring_ms": 10.0, "total_ms": 100.0 * (i + 1)},
            "token_usage": {"prompt_tokens": 10, "completion_tokens": i + 1},
        })
    rows[3].update(error={"type": "ModelError", "message": "boom"}, stop_condition="has_error", token_usage=None)
    rows[7].update(error="ToolCallError: bad tool", stop_condition="has_error")
    rows[4]["stop_condition"] = None
    rows[1]["metrics_errors"] = [{"func": "correct", "type": "ValueError", "message": "x"}]
    rows[5]["metrics_errors"] = [{"func": "correct", "type": "TypeError", "message": "y"},
                                 {"func": "len", "type": "KeyError", "message": "z"}]
    return rows


def test_summarize_rewards_and_metrics_of_the_scored_rollouts():
    s = summarize(make_rows())
    assert (s["num_rollouts"], s["num_examples"], s["rollouts_per_example"]) == (8, 2, 4)
    # rows 3 and 7 errored: they are counted (avg_error) and left out of every score, never scored 0
    assert s["num_scored"] == 6
    assert s["avg_reward"] == pytest.approx(3.5 / 6)
    assert s["std_reward"] == pytest.approx(math.sqrt(3.25 / 6 - (3.5 / 6) ** 2))
    assert s["avg_reward_errors_as_zero"] == pytest.approx(3.5 / 8)
    assert s["avg_metrics"] == pytest.approx({"correct": 3 / 6, "len": 20.0})
    assert s["std_metrics"] == pytest.approx({"correct": 0.5, "len": math.sqrt(200 / 3)})
    assert s["ci95"]["reward"]["rollouts"] == 6 and s["ci95"]["reward"]["mean"] == pytest.approx(3.5 / 6)


def test_summarize_pass_at_k_of_the_scored_rollouts():
    s = summarize(make_rows())
    # scored: example 0 has 3 rollouts, 2 pass; example 1 has 3, 1 passes (0.5 < threshold 1.0)
    assert list(s["pass_at_k"]) == ["1", "2"]
    assert s["pass_at_k"]["1"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert s["pass_at_k"]["2"] == pytest.approx((1.0 + 2 / 3) / 2)
    lenient = summarize(make_rows(), pass_threshold=0.5)
    assert lenient["pass_at_k"]["1"] == pytest.approx(2 / 3)


def test_a_run_whose_every_rollout_errored_has_no_reward_and_says_so():
    from prime_cli.evals.summary_view import summary_text

    rows = [{"example_id": e, "rollout_idx": k, "reward": 0.0, "metrics": {"m": 0.0},
             "error": {"type": "ModelError", "message": "HTTP 500"}} for e in range(3) for k in range(2)]
    s = summarize(rows)
    assert s["num_scored"] == 0 and s["avg_reward"] is None and s["avg_metrics"] == {} and s["pass_at_k"] == {}
    assert s["avg_reward_errors_as_zero"] == 0.0
    text = summary_text(s)
    assert "Reward: none: no rollout was scored (6 errored)" in text, text
    assert "pass@" not in text


def test_the_reward_line_says_how_many_errored_rollouts_it_leaves_out():
    from prime_cli.evals.summary_view import summary_text

    text = summary_text(summarize(make_rows()))
    line = next(line for line in text.splitlines() if line.startswith("Reward:"))
    assert line.startswith("Reward: 0.583 [") and "6 scored rollouts; 2 errored left out (0.438 with them as 0)" in line, line


def test_pass_at_k_goes_up_to_the_smallest_example():
    rows = [{"example_id": e, "reward": 1.0} for e, n in ((0, 3), (1, 5)) for _ in range(n)]
    s = summarize(rows)
    assert list(s["pass_at_k"]) == ["1", "2"]
    assert s["rollouts_per_example"] == 5


def test_summarize_errors_stops_timing_usage():
    s = summarize(make_rows())
    assert s["avg_error"] == pytest.approx(0.25)
    assert s["error_kinds"] == {"ModelError": 1, "ToolCallError": 1}
    assert s["metrics_errors"] == {"correct": 2, "len": 1}
    assert s["stop_conditions"] == {"answered": 5, "has_error": 2, "none": 1}
    assert s["is_truncated"] == pytest.approx(0.25)
    assert s["timing"] == pytest.approx({
        "avg_generation_ms": 440.0, "avg_scoring_ms": 10.0, "avg_total_ms": 450.0,
        "p50_total_ms": 450.0, "p95_total_ms": 765.0,
    })
    assert s["usage"] == pytest.approx({
        "prompt_tokens": 70, "completion_tokens": 32, "avg_prompt_tokens": 10.0, "avg_completion_tokens": 32 / 7,
    })


def test_summarize_splits_by_task():
    s = summarize(make_rows())
    assert set(s["per_task"]) == {"math", "code"}
    math_s, code_s = s["per_task"]["math"], s["per_task"]["code"]
    assert "per_task" not in math_s and "per_task" not in code_s
    assert math_s["num_rollouts"] == 4 and math_s["avg_reward"] == pytest.approx(2 / 3)
    assert math_s["pass_at_k"] == pytest.approx({"1": 2 / 3, "2": 1.0})
    assert code_s["avg_reward"] == pytest.approx(0.5)
    assert set(code_s["avg_metrics"]) == {"correct"}
    assert code_s["error_kinds"] == {"ToolCallError": 1}
    single = summarize([r for r in make_rows() if r["task"] == "math"])
    assert single["per_task"] == {}


def test_summarize_empty_rows():
    s = summarize([])
    assert s["num_rollouts"] == 0 and s["num_examples"] == 0 and s["rollouts_per_example"] == 0
    assert s["avg_reward"] is None and s["std_reward"] is None
    assert s["pass_at_k"] == {} and s["avg_metrics"] == {} and s["per_task"] == {}
    assert s["avg_error"] == 0.0 and s["is_truncated"] == 0.0
    assert s["usage"]["prompt_tokens"] == 0 and s["usage"]["avg_prompt_tokens"] is None
    assert s["timing"]["p95_total_ms"] is None
    json.dumps(s, allow_nan=False)


def test_running_stats_agree_with_summarize():
    rows = make_rows()
    stats = RunningStats()
    assert stats.snapshot() == {"done": 0, "avg_reward": None, "avg_metrics": {}, "errors": 0, "metrics_errors": 0}
    for i, r in enumerate(rows, start=1):
        stats.add(r)
        snap, full = stats.snapshot(), summarize(rows[:i])
        assert snap["done"] == full["num_rollouts"] == i
        assert snap["avg_reward"] == pytest.approx(full["avg_reward"])
        assert snap["avg_metrics"] == pytest.approx(full["avg_metrics"])
        assert snap["errors"] == round(full["avg_error"] * i)
        assert snap["metrics_errors"] == sum(full["metrics_errors"].values())
    assert stats.snapshot()["errors"] == 2 and stats.snapshot()["metrics_errors"] == 3


def test_metadata_fields_split():
    s = summarize(make_rows())
    fields = metadata_fields(s)
    assert set(fields) == {"avg_reward", "avg_metrics", "pass_at_k", "pass_hat_k", "avg_error", "usage", "summary"}
    assert fields["avg_reward"] == s["avg_reward"] and fields["pass_at_k"] == s["pass_at_k"]
    assert fields["summary"]["num_rollouts"] == 8 and fields["summary"]["per_task"] == s["per_task"]
    assert not {"avg_reward", "pass_at_k", "usage"} & set(fields["summary"])
    json.dumps(fields, allow_nan=False)


def test_store_and_summary_import_no_pandas():
    code = ("import sys, prime_cli.evals.store, prime_cli.results.summary; "
            "print(sorted(m for m in ('pandas', 'numpy', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_summary_gives_95_percent_intervals_clustered_by_example():
    from prime_cli.evals.summary_view import summary_text

    rows = [{"example_id": e, "rollout_idx": k, "reward": r, "metrics": {"m": r}}
            for e, rewards in enumerate([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]) for k, r in enumerate(rewards)]
    ci = summarize(rows)["ci95"]
    # hand-computed in tests/evals/test_intervals.py: se = sqrt(3) / 6, t(0.975, 2) = 4.302653
    assert ci["reward"]["mean"] == pytest.approx(0.5) and ci["reward"]["se"] == pytest.approx(3 ** 0.5 / 6)
    assert (ci["reward"]["examples"], ci["reward"]["rollouts"]) == (3, 6)
    assert ci["metrics"]["m"] == ci["reward"]
    assert set(ci["pass_at_k"]) == {"1", "2"}  # pass@1: per-example 0.5, 1, 0 -> plain standard error
    assert ci["pass_at_k"]["1"]["mean"] == pytest.approx(0.5)
    text = summary_text(summarize(rows))
    assert "Reward: 0.500 [-0.742, 1.742] (95% CI, clustered by example, 3 examples); std 0.500" in text


def test_one_rollout_per_example_labels_the_plain_standard_error():
    rows = [{"example_id": e, "rollout_idx": 0, "reward": r} for e, r in enumerate([0.2, 0.4, 0.9, 0.5])]
    assert "(95% CI, 4 rollouts)" in summarize(rows)["ci95"]["reward"]["label"]


def test_a_run_whose_examples_all_scored_the_same_says_so_instead_of_a_zero_width_interval():
    from prime_cli.evals.summary_view import summary_text

    rows = [{"example_id": e, "rollout_idx": k, "reward": 0.0, "metrics": {"m": 0.0}} for e in range(10) for k in range(2)]
    text = summary_text(summarize(rows))
    assert "Reward: 0.000 (every example scored the same: no spread to give an interval; clustered by example" in text
    assert "[0.000, 0.000]" not in text and "pass@1=0.000  pass@2=0.000" in text


def test_every_key_a_summary_holds_is_declared_in_the_summary_type():
    """metadata.json `summary` is read through the Summary TypedDict: a key written but not declared is
    a key no reader's type knows of (per_task holds summaries too)."""
    from prime_cli.records.eval_run import Summary

    rows = make_rows()
    for row, task in zip(rows, ["a", "a", "a", "a", "b", "b", "b", "b"], strict=True):
        row["task"] = task
    summary = summarize(rows)
    declared = set(Summary.__annotations__)
    assert set(summary) - declared == set()
    for part in summary["per_task"].values():
        assert set(part) - declared == set()
