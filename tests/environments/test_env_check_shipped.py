"""`prime env check` on every shipped environment, run as a user runs it (the installed `prime`, from the
repository so ./environments/ is used). No model is called. Each passes, in every mode of reverse-text: its
LCS reward is taken over the longer of reply and answer, so a 3-character prefix earns its share of the
answer and no more (2 * LCS over the sum of lengths, verifiers' ratio, paid it about twice that and the
check failed it)."""

from __future__ import annotations

import pytest

from tests.environments.conftest import REPO, data_root
from tests.support.cli import run_prime

EXPECTED = [  # (environment, arguments, exit code)
    ("alphabet-sort", [], 0),
    ("gsm8k", [], 0),
    ("math-python", [], 0),
    ("fix-bug", [], 0),
    ("wiki-search", [], 0),
    ("wordle", [], 0),
    ("reverse-text", [], 0),
    ("reverse-text", ["-a", '{"answer_without_tags": true}'], 0),
    ("reverse-text", ["-a", '{"plain_text": true}'], 0),
]


@pytest.mark.parametrize(("env_id", "args", "code"), EXPECTED, ids=[f"{e} {' '.join(a)}" for e, a, _ in EXPECTED])
def test_shipped_environment_check(env_id, args, code):
    result = run_prime(["env", "check", env_id, "-n", "10", *args], cwd=REPO, extra_env={"PRIME_DATA_DIR": str(data_root())})
    assert result.returncode == code, result.stdout + result.stderr
    problems = [line for line in result.stdout.splitlines() if line.startswith("problem: ")]
    assert not problems and result.stdout.strip().splitlines()[-1].startswith("ok: "), result.stdout
    assert "reference" in result.stdout and "Traceback" not in result.stderr
