"""One GEPA Candidate (records/gepa_run.py): the engine's search state and the reader hold the same class,
and a candidates.jsonl line round-trips through it with today's on-disk key names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from prime_cli.gepa.state import Candidate as EngineCandidate
from prime_cli.records.gepa_run import Candidate, read_gepa_run
from prime_cli.records.json_lines import JsonLinesError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "records"


def test_the_engine_and_the_reader_hold_one_candidate_class():
    run = read_gepa_run(FIXTURES / "gepa-v0")
    assert EngineCandidate is Candidate
    assert all(type(c) is Candidate for c in run.candidates)
    assert run.candidate(1).parent == 0 and run.candidate(1).prompt.startswith("You reverse text character")


def test_a_line_keeps_todays_keys_and_reads_back_as_the_same_candidate():
    cand = Candidate(3, "prompt", 1, [1.0, None, 0.5], 2, 40, val_errored=4, val_rows_run=3)
    line = cand.line()
    assert list(line) == ["candidate_idx", "system_prompt", "parent_idx", "val_scores", "val_mean", "val_errored",
                          "val_rows_run", "iteration", "discovered_at_calls"]
    assert line["system_prompt"] == "prompt" and line["parent_idx"] == 1 and line["val_mean"] == 0.75
    assert Candidate.from_line(line) == cand


def test_a_line_of_an_early_version_reads_with_defaults():
    cand = Candidate.from_line({"candidate_idx": 0, "system_prompt": "seed", "parent_idx": None,
                                "val_scores": [1, 0], "iteration": 0})
    assert cand == Candidate(0, "seed", None, [1.0, 0.0], 0, None)
    assert cand.val_mean == 0.5 and cand.val_rows_run is None


def test_a_damaged_middle_line_is_an_error_naming_it_and_a_torn_last_line_is_left_out(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "gepa-v0", run_dir)
    path = run_dir / "candidates.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines) + '{"candidate_idx": 3, "system_pro', encoding="utf-8")
    assert [c.idx for c in read_gepa_run(run_dir).candidates] == [0, 1, 2]
    path.write_text(lines[0] + "not json\n" + "".join(lines[1:]), encoding="utf-8")
    with pytest.raises(JsonLinesError, match=r"candidates\.jsonl:2: not valid JSON"):
        read_gepa_run(run_dir)
