"""`prime env check` on every shipped environment, run as a user runs it (the installed `prime`, from the
repository so ./environments/ is used). No model is called. reverse-text's default reward (2 * LCS over the
sum of lengths) pays a 3-character prefix about twice its share of the answer: the check says so and fails;
its plain_text mode (LCS over the longer length) passes."""

from __future__ import annotations

import pytest

from tests.environments.conftest import REPO, data_root
from tests.support.cli import run_prime

EXPECTED = [
    ("alphabet-sort", [], 0),
    ("gsm8k", [], 0),
    ("math-python", [], 0),
    ("wiki-search", [], 0),
    ("wordle", [], 0),
    ("reverse-text", [], 1),
    ("reverse-text", ["-a", '{"plain_text": true}'], 0),
]


@pytest.mark.parametrize(("env_id", "args", "code"), EXPECTED, ids=[f"{e} {' '.join(a)}" for e, a, _ in EXPECTED])
def test_shipped_environment_check(env_id, args, code):
    result = run_prime(["env", "check", env_id, "-n", "10", *args], cwd=REPO, extra_env={"PRIME_DATA_DIR": str(data_root())})
    assert result.returncode == code, result.stdout + result.stderr
    problems = [line for line in result.stdout.splitlines() if line.startswith("problem: ")]
    assert bool(problems) == bool(code), result.stdout
    assert "reference" in result.stdout and "Traceback" not in result.stderr
    if code:
        assert any("lcs_reward" in p and "brevity is paid" in p for p in problems), problems
