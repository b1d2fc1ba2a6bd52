"""The read side: the lazy results index, run discovery, and the GEPA run reader."""

import json
import os

import pytest

import prime_cli.results.eval_reader as reader
from prime_cli.records.eval_rows import read_results
from prime_cli.records.gepa_run import read_gepa_run
from prime_cli.results.eval_reader import ResultsIndex, discover_runs
from prime_cli.runs.metadata import RunDirError
from prime_cli.tui.locate import NoRunsError, locate
from tests.tui.fixtures import CHILD, SEED, append_rows, rows_for, write_eval_run, write_gepa_run


def test_index_reads_rows_lazily_and_agrees_with_the_store(tmp_path):
    run_dir = write_eval_run(tmp_path, rows_for(5, 3))
    index = ResultsIndex(run_dir)
    assert index.scan(max_bytes=2000) < 15  # a slice: only the first rows
    index.scan()
    assert len(index) == 15
    assert [index.row(i) for i in range(15)] == read_results(run_dir)


def test_index_skips_a_truncated_tail_until_it_is_complete(tmp_path):
    rows = rows_for(2, 2)
    run_dir = write_eval_run(tmp_path, rows[:3])
    line = json.dumps(rows[3])
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.write(line[:25])
    index = ResultsIndex(run_dir)
    assert index.scan() == 3
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.write(line[25:])  # whole now, but still without its newline
    assert index.scan() == 1 and index.row(3) == rows[3]
    append_rows(run_dir, rows[:1])
    assert index.scan() == 1 and len(index) == 5 and index.row(4) == rows[0]


def test_index_restarts_when_the_file_is_replaced_by_rename(tmp_path):
    run_dir = write_eval_run(tmp_path, rows_for(2, 2))
    index = ResultsIndex(run_dir)
    index.scan()
    tmp = run_dir / ".results.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows_for(2, 2))))
    os.replace(tmp, run_dir / "results.jsonl")
    index.scan()
    assert index.generation == 1 and len(index) == 4 and index.row(0)["example_id"] == 1


def test_index_handles_lines_longer_than_a_slice_and_bad_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "SCAN_SLICE", 64)
    run_dir = write_eval_run(tmp_path, rows_for(2, 1))
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.write("not json\n\n")
    index = ResultsIndex(run_dir)
    index.scan()
    assert len(index) == 3 and index.row(0)["example_id"] == 0 and index.row(1)["example_id"] == 1
    assert index.row(2)["error"]["type"] == "InvalidLine"


def test_discover_finds_eval_and_gepa_runs_and_skips_broken_ones(tmp_path):
    write_eval_run(tmp_path, rows_for(1, 1))
    write_eval_run(tmp_path, rows_for(1, 1), run_id="20260101-140000-bbb222", date="2026-01-01T14:00:00+00:00")
    write_gepa_run(tmp_path)
    broken = tmp_path / "outputs" / "evals" / "x--m" / "bad"
    broken.mkdir(parents=True)
    (broken / "metadata.json").write_text("{not json")
    entries = discover_runs([tmp_path / "outputs"])
    assert [(e.kind, e.run_id) for e in entries] == [
        ("eval", "20260101-140000-bbb222"), ("eval", "20260101-120000-abc123"), ("gepa", "20260102-090000-def456")]
    assert entries[2].avg_reward == 0.75 and entries[0].size_text == "1x1"


def test_locate_defaults_and_clear_errors(tmp_path):
    with pytest.raises(NoRunsError, match="prime eval run ENV -s"):
        locate(None, tmp_path)
    with pytest.raises(NoRunsError, match="does not exist"):
        locate("nowhere", tmp_path)
    env_root = tmp_path / "environments" / "reverse_text"
    run_dir = write_eval_run(env_root, rows_for(1, 1))
    located = locate(None, tmp_path)
    assert [e.path for e in located.entries] == [run_dir] and located.start is None
    direct = locate(run_dir / "results.jsonl", tmp_path)
    assert direct.start.path == run_dir and direct.rows_first
    (run_dir / "metadata.json").write_text("[]")
    with pytest.raises(RunDirError, match="expected an object"):
        locate(run_dir, tmp_path)


def test_gepa_reader_lineage_frontier_and_a_run_being_written(tmp_path):
    run = read_gepa_run(write_gepa_run(tmp_path))
    assert [c.idx for c in run.candidates] == [0, 1, 2] and run.best_idx == 1
    assert run.lineage(2) == [0, 1, 2] and run.lineage(0) == [0]
    assert run.frontier_counts() == {0: 1, 1: 3, 2: 3}
    assert run.best_prompt_text() == CHILD and len(run.iterations) == 3
    live = read_gepa_run(write_gepa_run(tmp_path / "live", status="running", truncated_tail=True))
    assert len(live.candidates) == 3 and live.best_prompt is None and live.status == "running"
    assert live.best_prompt_text() == CHILD  # from metadata's best_idx when best_prompt.txt is not there yet
    assert live.candidate(0).prompt == SEED
