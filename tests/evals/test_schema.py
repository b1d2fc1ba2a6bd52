"""The typed record of an eval run: layout names, metadata validation, and runs in the previous format."""

import json
from pathlib import Path

import pytest

from prime_cli.evals.store import RunStore, default_base_dir
from prime_cli.records.eval_run import ROW_KEYS, EvalRunLayout, RunMetadata
from prime_cli.results.eval_run import load_run
from prime_cli.runs.metadata import RunDirError, read_metadata

# metadata.json as verifiers-era runs and prime before api_key_var/endpoints_path/local_model/retries/
# error_budget/summary/status wrote it: none of the newer fields, plus a key nobody knows
OLD_METADATA = {
    "env_id": "reverse-text", "env_args": {}, "model": "gpt-4.1-mini", "base_url": "https://api.openai.com/v1",
    "num_examples": 2, "rollouts_per_example": 2, "sampling_args": {"max_tokens": 64}, "date": "2025-06-01",
    "time_ms": 1234.5, "avg_reward": 0.5, "avg_metrics": {"lcs": 0.5}, "pass_at_k": {"1": 0.5},
    "avg_error": 0.0, "usage": {}, "version_info": {"verifiers": "0.1.3"}, "state_columns": [], "tools": [],
    "custom_note": {"kept": True},
}
# rows of that era: no metrics_errors, no token_usage, no timing; the last line cut off mid-write
OLD_ROWS = [
    {"example_id": 0, "rollout_idx": 0, "prompt": [{"role": "user", "content": "abc"}],
     "completion": [{"role": "assistant", "content": "cba"}], "answer": "cba", "task": "default", "info": {},
     "reward": 1.0, "metrics": {"lcs": 1.0}, "error": None, "is_completed": True, "is_truncated": False,
     "stop_condition": "max_turns"},
    {"example_id": 0, "rollout_idx": 1, "prompt": [{"role": "user", "content": "abc"}],
     "completion": [{"role": "assistant", "content": "abc"}], "answer": "cba", "task": "default", "info": {},
     "reward": 0.0, "metrics": {"lcs": 0.0}, "error": "TimeoutError: slow", "turn": 3},
]


def old_run(root: Path) -> Path:
    run_dir = root / "outputs" / "evals" / "reverse-text--gpt-4.1-mini" / "20250601-120000-abc123"
    run_dir.mkdir(parents=True)
    (run_dir / "metadata.json").write_text(json.dumps(OLD_METADATA, indent=2))
    text = "".join(json.dumps(row) + "\n" for row in OLD_ROWS) + '{"example_id": 1, "rollout_idx": 0, "prom'
    (run_dir / "results.jsonl").write_text(text)
    return run_dir


def test_layout_owns_the_file_names_and_the_folder_rule(tmp_path):
    layout = EvalRunLayout(tmp_path / "run1")
    assert (layout.metadata_path.name, layout.results_path.name, layout.log_path.name) == (
        "metadata.json", "results.jsonl", "eval.log")
    assert layout.run_id == "run1" and not layout.is_run()
    assert EvalRunLayout.runs_folder("owner/env", "a/b", cwd=tmp_path) == tmp_path / "outputs/evals/owner--env--a--b"
    assert default_base_dir("owner/env", "a/b", cwd=tmp_path) == EvalRunLayout.runs_folder("owner/env", "a/b", cwd=tmp_path)


def test_a_run_in_the_previous_format_loads(tmp_path):
    run = load_run(old_run(tmp_path))
    assert [(r["example_id"], r["rollout_idx"]) for r in run.rows] == [(0, 0), (0, 1)]  # truncated line left out
    meta = run.metadata
    assert (meta.env_id, meta.model, meta.num_examples, meta.avg_reward) == ("reverse-text", "gpt-4.1-mini", 2, 0.5)
    # fields the old file lacks get defaults; a file with no status is a finished run of another tool
    assert meta.status == "completed" and meta.local_model is False and meta.api_key_var is None
    assert meta.retries is None and meta.summary is None and meta.reward_functions == []
    assert meta.model_extra == {"custom_note": {"kept": True}}
    assert meta.to_record()["custom_note"] == {"kept": True}


def test_to_pandas_of_an_old_run_has_every_column_and_flat_metrics(tmp_path):
    frame = load_run(old_run(tmp_path)).to_pandas()
    assert len(frame) == 2
    assert set(ROW_KEYS) - {"timing", "token_usage", "metrics_errors", "judge_usage"} <= set(frame.columns)
    assert "turn" in frame.columns and frame["turn"].tolist()[1] == 3  # an extra state column
    assert frame["metrics.lcs"].tolist() == [1.0, 0.0]
    assert frame["completion"][0] == [{"role": "assistant", "content": "cba"}]


def test_a_previous_format_run_can_be_resumed_by_the_store(tmp_path):
    run_dir = old_run(tmp_path)
    with RunStore.open(run_dir) as store:
        store.append({"example_id": 1, "rollout_idx": 0, "reward": 1.0})
        store.update_metadata(status="completed")
    run = load_run(run_dir)
    assert [(r["example_id"], r["rollout_idx"]) for r in run.rows] == [(0, 0), (0, 1), (1, 0)]
    assert read_metadata(run_dir)["custom_note"] == {"kept": True}


def test_load_run_accepts_the_results_file_and_refuses_what_is_not_an_eval_run(tmp_path):
    run_dir = old_run(tmp_path)
    assert load_run(run_dir / "results.jsonl").path == run_dir
    with pytest.raises(RunDirError, match="no such folder"):
        load_run(tmp_path / "missing")
    gepa = tmp_path / "gepa-run"
    gepa.mkdir()
    (gepa / "candidates.jsonl").write_text("")
    with pytest.raises(RunDirError, match="GEPA run folder"):
        load_run(gepa)


def test_metadata_with_a_wrongly_typed_field_names_it(tmp_path):
    run_dir = old_run(tmp_path)
    (run_dir / "metadata.json").write_text(json.dumps({**OLD_METADATA, "status": "exploded"}))
    with pytest.raises(RunDirError, match="status"):
        load_run(run_dir)


def test_run_metadata_defaults_round_trip_without_end_of_run_sections():
    record = RunMetadata(env_id="e", model="m", status="running").to_record()
    assert record["status"] == "running" and record["avg_reward"] is None
    assert not {"retries", "error_budget", "summary"} & set(record)
