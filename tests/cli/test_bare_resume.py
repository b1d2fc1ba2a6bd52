"""A bare `-R` (no folder after it) means what the command says it means, and an error names only what
the user typed: `prime eval run ENV -R` resumes the newest unfinished run; `prime gepa run` and
`prime eval rescore` need the folder, and say so instead of complaining about a value nobody typed."""

from __future__ import annotations

import pytest

from tests.cli.conftest import one_error_line, snapshot
from tests.support.cli import run_prime

URL = "http://127.0.0.1:9/v1"  # nothing listens: nothing here may reach a model


@pytest.mark.parametrize("args", [
    ["gepa", "run", "reverse-text", "-R"],
    ["gepa", "run", "-R"],
    ["gepa", "run", "reverse-text", "--resume", "-m", "x", "-b", URL],
    ["eval", "rescore", "some-run", "-R"],
    ["eval", "rescore", "some-run", "--resume", "--json"],
])
def test_a_bare_resume_that_needs_a_folder_says_so(args, tmp_path):
    before = snapshot(tmp_path)
    result = run_prime(args, tmp_path)
    flag = "--resume" if "--resume" in args else "-R"
    one_error_line(result, flag, "folder")
    assert "latest" not in result.stderr + result.stdout
    assert "Usage:" not in result.stderr + result.stdout
    assert snapshot(tmp_path) == before


def test_a_bare_resume_of_an_eval_looks_for_the_newest_unfinished_run(tmp_path):
    result = run_prime(["eval", "run", "reverse-text", "-m", "x", "-b", URL, "-R"], tmp_path)
    one_error_line(result, "-R", "no unfinished run", "-R DIR")
    assert "latest" not in result.stderr


def test_a_folder_named_after_the_flag_is_still_a_folder(tmp_path):
    """Only a missing value is bare: the word after -R is its value even when it looks like anything else."""
    result = run_prime(["gepa", "run", "reverse-text", "-R", "latest"], tmp_path)
    one_error_line(result, "-R latest")  # the user typed it, so naming it is right
