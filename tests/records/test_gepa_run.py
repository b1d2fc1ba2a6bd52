"""One GEPA Candidate (records/gepa_run.py): the engine's search state and the reader hold the same class,
and a candidates.jsonl line round-trips through it with today's on-disk key names."""

from __future__ import annotations

from pathlib import Path

from prime_cli.gepa.state import Candidate as EngineCandidate
from prime_cli.records.gepa_run import Candidate
from prime_cli.results.gepa_reader import read_gepa_run

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
