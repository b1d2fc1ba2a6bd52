"""`prime eval compare A B` through the installed script, on run folders written in the test."""

from __future__ import annotations

import json
import math
import statistics

from tests.support.cli import run_prime
from tests.tui.fixtures import rows_for, write_eval_run


def two_runs(tmp_path, shift: float, n: int = 30, r: int = 3, errors=frozenset(), env_b: str = "reverse-text"):
    base = lambda e, k: ((e * 7) % 10) / 10 * 0.8 + 0.05 * ((e + k) % 3)  # noqa: E731
    a = write_eval_run(tmp_path / "a", rows_for(n, r, base), model="m-a")
    b = write_eval_run(tmp_path / "b", rows_for(n, r, lambda e, k: base(e, k) + shift, errors=errors), model="m-b",
                       env_id=env_b)
    return a, b


def test_a_planted_improvement_is_called_with_its_interval_counts_and_p(tmp_path):
    a, b = two_runs(tmp_path, 0.1)
    done = run_prime(["eval", "compare", str(a), str(b)], tmp_path)
    assert done.returncode == 0, done.stderr
    verdict = next(line for line in done.stdout.splitlines() if line.startswith("reward: "))
    assert verdict.startswith("reward: B is better: +0.100 [+0.100, +0.100], p < 0.001, 30 paired examples"), verdict
    assert "30 better, 0 worse, 0 unchanged" in done.stdout
    assert "lcs_reward: +0.100" in done.stdout


def test_no_difference_is_not_called_a_difference(tmp_path):
    a, b = two_runs(tmp_path, 0.0)
    done = run_prime(["eval", "compare", str(a), str(b), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["reward"]["difference"] == 0 and result["reward"]["p_value"] == 1.0
    assert result["reward"]["verdict"] == "no difference: all 30 paired examples scored the same in A and B"
    assert result["reward"]["unchanged"] == 30


def test_the_json_numbers_are_the_hand_computed_paired_t(tmp_path):
    # B - A per example: +0.2 on even examples, 0 on odd ones (10 examples, 2 rollouts each)
    a = write_eval_run(tmp_path / "a", rows_for(10, 2, lambda e, k: 0.5))
    b = write_eval_run(tmp_path / "b", rows_for(10, 2, lambda e, k: 0.7 if e % 2 == 0 else 0.5))
    result = json.loads(run_prime(["eval", "compare", str(a), str(b), "--json", "--power", "0.05"], tmp_path).stdout)
    diffs = [0.2 if e % 2 == 0 else 0.0 for e in range(10)]
    se = statistics.stdev(diffs) / math.sqrt(10)
    assert result["reward"]["difference"] == 0.1 or abs(result["reward"]["difference"] - 0.1) < 1e-12
    assert abs(result["reward"]["se"] - se) < 1e-12
    t = 0.1 / se  # 3.0 on 9 df: two-sided p = 0.01496
    assert abs(t - 3.0) < 1e-9 and abs(result["reward"]["p_value"] - 0.014956) < 1e-5
    half = 2.262157 * se  # t(0.975, 9)
    assert abs(result["reward"]["ci95"][0] - (0.1 - half)) < 1e-5
    assert (result["reward"]["better"], result["reward"]["unchanged"]) == (5, 5)
    # (1.96 + 0.8416)^2 * (sd 0.1054 / 0.05)^2 = 34.9 -> 35
    assert result["power"]["examples_needed"] == 35


def test_errored_rollouts_are_left_out_and_counted_not_scored_zero(tmp_path):
    same = lambda e, k: 0.1 + e / 20  # noqa: E731 - every rollout of an example scores the same
    a = write_eval_run(tmp_path / "a", rows_for(10, 3, same))
    b = write_eval_run(tmp_path / "b", rows_for(10, 3, same, errors={(0, 0), (1, 1)}))
    done = run_prime(["eval", "compare", str(a), str(b)], tmp_path)
    assert "errored rollouts left out: 0 in A, 2 in B" in done.stdout
    # a zero for the errored rollouts would have made examples 0 and 1 worse
    assert "0 better, 0 worse, 10 unchanged" in done.stdout and "reward: no difference: all 10 paired examples" in done.stdout


def test_other_environments_or_no_shared_examples_are_refused_in_one_line(tmp_path):
    a, b = two_runs(tmp_path, 0.0, env_b="gsm8k")
    done = run_prime(["eval", "compare", str(a), str(b)], tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "'reverse-text'" in done.stderr and "'gsm8k'" in done.stderr
    c = write_eval_run(tmp_path / "c", [row | {"example_id": row["example_id"] + 100} for row in rows_for(3, 2)])
    apart = run_prime(["eval", "compare", str(a), str(c)], tmp_path)
    assert apart.returncode == 2 and "no example in common" in apart.stderr
    missing = run_prime(["eval", "compare", str(a), str(tmp_path / "nope")], tmp_path)
    assert missing.returncode == 2 and "no such folder" in missing.stderr


def test_different_sampling_is_a_warning_not_a_refusal(tmp_path):
    a, b = two_runs(tmp_path, 0.0)
    meta = json.loads((b / "metadata.json").read_text())
    meta["sampling_args"] = {"temperature": 1.0}
    (b / "metadata.json").write_text(json.dumps(meta))
    done = run_prime(["eval", "compare", str(a), str(b)], tmp_path)
    assert done.returncode == 0
    assert "warning: the runs differ in sampling (temperature: 0.7 vs 1.0)" in done.stderr


def test_eval_run_power_says_how_many_examples_would_detect_delta(tmp_path):
    from prime_cli.results.intervals import clustered_interval, examples_needed
    from tests.evals.cli_support import only_run_dir, read_rows
    from tests.support.scripted_server import ScriptedOpenAIServer, default_reply

    calls = iter(range(10**6))

    def uneven(request):  # a correct reversal, cut short on every 4th request: some examples get 1 cut of 3, some none
        text = default_reply(request)  # (every 3rd would cut one rollout of each: every example alike, no spread)
        return text if next(calls) % 4 else text[: len(text) // 2]

    with ScriptedOpenAIServer(reply=uneven) as server:
        done = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "12", "-r", "3", "-s",
                          "-c", "1", "--power", "0.1"], tmp_path)
    assert done.returncode == 0, done.stderr
    rows = read_rows(only_run_dir(tmp_path / "outputs"))
    by_example: dict = {}
    for row in rows:
        by_example.setdefault(row["example_id"], []).append(row["reward"])
    interval = clustered_interval(by_example)
    assert interval.se > 0
    needed = examples_needed(math.sqrt(2) * interval.se * math.sqrt(12), 0.1)
    line = next(line for line in done.stdout.splitlines() if "Power" in line)
    assert f"about {needed} examples per run to detect a difference of 0.100" in line and "this run has 12" in line
    assert f"[{interval.low:.3f}, {interval.high:.3f}] (95% CI, clustered by example, 12 examples)" in done.stdout
