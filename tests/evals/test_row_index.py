"""results.index: the columns give back every row's small fields; a stale or damaged index is ignored."""

from __future__ import annotations

import json
import math
from pathlib import Path

from prime_cli.results.eval_reader import ResultsIndex, slim_row
from prime_cli.results.row_columns import RowColumns
from prime_cli.results.row_index import INDEX_FILE, load_index, write_index

ODD_ROWS = [
    {"example_id": 0, "rollout_idx": 0, "prompt": [{"role": "user", "content": "hi"}], "completion": [], "answer": "x",
     "info": {"k": 1}, "reward": 1.0, "metrics": {"correct": 1.0, "format": 1}, "error": None,
     "timing": {"total_ms": 12.5}, "token_usage": {"completion_tokens": 7}, "task": "a", "is_truncated": False},
    # reward an int, a metric missing and another new, an error dict, no timing, a state column
    {"example_id": "e-1", "rollout_idx": 1, "reward": 0, "metrics": {"format": 0.5, "judge": None},
     "error": {"type": "ModelError", "message": "boom"}, "task": "b", "is_truncated": True, "answer_len": 3},
    # no reward key, metrics null, metrics_errors a list, timing an empty dict
    {"example_id": 2, "rollout_idx": 0, "metrics": None, "metrics_errors": [{"func": "f", "error": "x"}], "timing": {},
     "error": "plain text error", "reward": float("nan"), "stop_condition": "max_turns"},
    {"example_id": 3, "rollout_idx": 0, "reward": None, "metrics": {}, "task": None},
]


def write_rows(run_dir: Path, rows: list[dict]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run_dir


def same(a, b) -> bool:
    """Equal, counting NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_index_round_trip_gives_back_each_rows_small_fields(tmp_path):
    run_dir = write_rows(tmp_path / "run", ODD_ROWS)
    assert write_index(run_dir)
    found = load_index(run_dir)
    assert found is not None and len(found.columns) == len(ODD_ROWS)
    for i, row in enumerate(ODD_ROWS):
        assert same(found.columns.as_dict(i), slim_row(row)), i
    lines = ResultsIndex(run_dir)
    lines.scan()
    starts, ends, scanned = lines.offsets()
    assert list(found.starts) == list(starts) and list(found.ends) == list(ends) and found.scanned == scanned
    lines.close()


def test_small_rows_read_like_the_rows(tmp_path):
    columns = RowColumns()
    for row in ODD_ROWS:
        columns.append(row)
    first, second = columns.row(0), columns.row(1)
    assert first["metrics"].get("correct") == 1.0 and dict(first["metrics"]) == {"correct": 1.0, "format": 1}
    assert "judge" not in first["metrics"] and second["metrics"].get("judge") is None and "judge" in second["metrics"]
    assert "prompt" not in first and first.get("prompt") is None and second.get("answer_len") == 3
    assert columns.row(2).get("reward") != columns.row(2).get("reward")  # NaN kept
    assert columns.row(2).get("metrics") is None and columns.row(3)["reward"] is None
    assert "timing" not in columns.row(1) and dict(columns.row(2)["timing"]) == {}


def test_an_index_for_another_version_of_the_file_is_not_used(tmp_path):
    run_dir = write_rows(tmp_path / "run", ODD_ROWS[:2])
    assert write_index(run_dir) and load_index(run_dir) is not None
    with (run_dir / "results.jsonl").open("a") as fh:  # a resumed run appended a row
        fh.write(json.dumps(ODD_ROWS[2]) + "\n")
    assert load_index(run_dir) is None
    assert write_index(run_dir) and len(load_index(run_dir).columns) == 3


def test_a_damaged_or_foreign_index_is_not_used(tmp_path):
    run_dir = write_rows(tmp_path / "run", ODD_ROWS)
    assert write_index(run_dir)
    good = (run_dir / INDEX_FILE).read_bytes()
    for damaged in (good[: len(good) // 2], good[:40], b"", b"\x00" * 200, b"{}", good.replace(b'"count":4', b'"count":5')):
        (run_dir / INDEX_FILE).write_bytes(damaged)
        assert load_index(run_dir) is None
    (run_dir / INDEX_FILE).unlink()
    assert load_index(run_dir) is None


def test_an_unwritable_index_is_reported_not_raised(tmp_path):
    run_dir = write_rows(tmp_path / "run", ODD_ROWS)
    (run_dir / INDEX_FILE).mkdir()  # something that cannot be replaced by a file
    assert write_index(run_dir) is False
    assert not list(run_dir.glob(".*.tmp"))
