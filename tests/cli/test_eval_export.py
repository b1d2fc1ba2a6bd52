"""`prime eval export RUN --format csv|parquet|jsonl`, through the installed script, on a run saved by
`prime eval run -s` against the scripted server; each file is read back with pandas."""

import json

import pandas as pd
import pytest

from tests.cli.conftest import one_error_line, run_dirs, snapshot
from tests.support.cli import run_prime


@pytest.fixture(scope="module")
def run_dir(saved_eval):
    (found,) = run_dirs(saved_eval)
    return found


def saved_rows(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def export(run_dir, fmt, out):
    result = run_prime(["eval", "export", str(run_dir), "--format", fmt, "-o", str(out)], out.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"exported {len(saved_rows(run_dir))} rows to {out}" in result.stdout
    return out


def test_jsonl_export_holds_the_saved_rows(run_dir, tmp_path):
    out = export(run_dir, "jsonl", tmp_path / "run.jsonl")
    rows = saved_rows(run_dir)
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows
    frame = pd.read_json(out, lines=True)
    assert list(frame.columns) == list(rows[0]) and len(frame) == len(rows) == 6
    assert frame["completion"].tolist() == [row["completion"] for row in rows]
    assert frame["reward"].tolist() == pytest.approx([row["reward"] for row in rows])


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_flat_export_has_each_row_nested_fields_as_json_and_metric_columns(run_dir, tmp_path, fmt):
    out = export(run_dir, fmt, tmp_path / f"run.{fmt}")
    frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    rows = saved_rows(run_dir)
    metric_names = list(rows[0]["metrics"])
    assert metric_names, rows[0]
    assert list(frame.columns) == list(rows[0]) + [f"metrics.{name}" for name in metric_names]
    assert len(frame) == len(rows) == 6
    for record, row in zip(frame.to_dict("records"), rows, strict=True):
        assert (record["example_id"], record["rollout_idx"]) == (row["example_id"], row["rollout_idx"])
        assert record["reward"] == pytest.approx(row["reward"])
        for name in ("prompt", "completion", "metrics", "info"):
            assert json.loads(record[name]) == row[name], name
        for name in metric_names:
            assert record[f"metrics.{name}"] == pytest.approx(row["metrics"][name])


def test_default_output_is_named_for_the_run_in_the_current_folder(run_dir, tmp_path):
    result = run_prime(["eval", "export", str(run_dir)], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    (written,) = tmp_path.glob("*.csv")
    assert written.name == f"{run_dir.parent.name}--{run_dir.name}.csv"
    assert len(pd.read_csv(written)) == len(saved_rows(run_dir))


def test_parquet_without_pyarrow_says_how_to_install_it(run_dir, tmp_path):
    blocker = tmp_path / "site" / "pyarrow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named pyarrow')\n")
    before = snapshot(run_dir)
    result = run_prime(["eval", "export", str(run_dir), "-f", "parquet", "-o", str(tmp_path / "x.parquet")], tmp_path,
                       extra_env={"PYTHONPATH": str(tmp_path / "site")})
    one_error_line(result, "pip install pyarrow")
    assert not (tmp_path / "x.parquet").exists() and snapshot(run_dir) == before


def test_export_refuses_a_folder_that_is_not_an_eval_run_and_the_runs_own_files(run_dir, tmp_path):
    one_error_line(run_prime(["eval", "export", str(tmp_path)], tmp_path), "not an eval run folder")
    before = snapshot(run_dir)
    result = run_prime(["eval", "export", str(run_dir), "-f", "jsonl", "-o", str(run_dir / "results.jsonl")], tmp_path)
    one_error_line(result, "file of the run itself")
    assert snapshot(run_dir) == before
