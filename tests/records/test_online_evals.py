"""evals.jsonl is read by the one torn-line rule (prime_cli/records/online_evals.py): a torn last line (an
eval being written) is left out, a bad line elsewhere is an error naming file:line (it was skipped)."""

from __future__ import annotations

import pytest

from prime_cli.records.json_lines import JsonLinesError
from prime_cli.records.online_evals import read_evals


def test_a_torn_last_line_is_left_out_and_a_line_without_a_step_is_not_an_eval(tmp_path):
    path = tmp_path / "evals.jsonl"
    path.write_text('{"step": 0, "eval/e/reward/mean": 0.1}\n{"note": "no step"}\n{"step": 2, "eval/e/rew')
    assert read_evals(path) == [{"step": 0, "eval/e/reward/mean": 0.1}]
    assert read_evals(tmp_path / "missing.jsonl") == []


def test_a_bad_middle_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "evals.jsonl"
    path.write_text('{"step": 0}\n{"step": 1, "eval/e/rew\n{"step": 2}\n')
    with pytest.raises(JsonLinesError, match=r"evals\.jsonl:2: not valid JSON"):
        read_evals(path)
