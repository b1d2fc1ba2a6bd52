"""`prime eval compare --power DELTA` when the paired differences have no spread (issue 54, item 6): the
sample size grows with the spread of the per-example differences, so a spread of zero sizes nothing. It
used to say "about 2 paired examples" would detect DELTA; it says the size cannot be estimated and why.
Through the installed `prime`, on run folders written in the test."""

from __future__ import annotations

import json

from tests.support.cli import run_prime
from tests.tui.fixtures import rows_for, write_eval_run


def runs(tmp_path, shift: float):
    base = lambda e, k: ((e * 7) % 10) / 10 * 0.8  # noqa: E731 - examples differ, rollouts of one agree
    a = write_eval_run(tmp_path / "a", rows_for(12, 2, base), model="m-a")
    b = write_eval_run(tmp_path / "b", rows_for(12, 2, lambda e, k: base(e, k) + shift), model="m-b")
    return str(a), str(b)


def power_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("to detect a difference"))


def test_identical_runs_do_not_claim_two_examples_would_detect_a_difference(tmp_path):
    a, b = runs(tmp_path, 0.0)
    done = run_prime(["eval", "compare", a, b, "--power", "0.05"], tmp_path)
    assert done.returncode == 0, done.stderr
    line = power_line(done.stdout)
    assert "about 2 paired examples" not in line and "paired examples (this comparison" not in line, line
    assert line.startswith("to detect a difference of 0.05 at 80% power: cannot be estimated"), line
    assert "all 12 paired examples differ by the same +0.000" in line, line
    result = json.loads(run_prime(["eval", "compare", a, b, "--power", "0.05", "--json"], tmp_path).stdout)
    assert result["power"]["examples_needed"] is None
    assert result["power"]["reason"] == "no_spread" and "no spread" in result["power"]["note"]


def test_a_constant_shift_has_no_spread_either(tmp_path):
    a, b = runs(tmp_path, 0.1)  # every example better by 0.1 (float noise in the differences is no spread)
    done = run_prime(["eval", "compare", a, b, "--power", "0.05"], tmp_path)
    assert done.returncode == 0, done.stderr
    line = power_line(done.stdout)
    assert "cannot be estimated" in line and "differ by the same +0.100" in line, line


def test_a_spread_still_gives_its_estimate(tmp_path):
    a = write_eval_run(tmp_path / "a", rows_for(10, 2, lambda e, k: 0.5))
    b = write_eval_run(tmp_path / "b", rows_for(10, 2, lambda e, k: 0.7 if e % 2 == 0 else 0.5))
    done = run_prime(["eval", "compare", str(a), str(b), "--power", "0.05"], tmp_path)
    assert "about 35 paired examples (this comparison has 10)" in power_line(done.stdout)


def test_eval_run_power_on_a_run_whose_examples_all_scored_the_same(tmp_path):
    from tests.evals.cli_support import only_run_dir
    from tests.support.scripted_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:  # every reply right: each example 1.2
        done = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "6", "-r", "2", "-s",
                          "--power", "0.1"], tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("Power"))
    assert "about 2 examples" not in line and "fewer than 2 examples" not in line, line
    assert "cannot be estimated" in line and "all 6 examples scored the same" in line, line
    power = json.loads((only_run_dir(tmp_path / "outputs") / "metadata.json").read_text())["summary"].get("power")
    assert power is None or power["examples_needed"] is None
