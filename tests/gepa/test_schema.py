"""The GEPA run's typed record (prime_cli/records/gepa_run.py) and its layout: the writer and the readers
agree on every file name, and runs written in earlier formats still load."""

from __future__ import annotations

import json

from prime_cli.gepa.run_dir import GepaRunDir
from prime_cli.gepa.state import Candidate, SearchState
from prime_cli.records.gepa_run import GepaRunLayout, is_gepa_run, read_gepa_run
from prime_cli.results.eval_reader import discover_runs, read_entry
from prime_cli.runs.folders import folder_kind


def test_the_writer_puts_every_file_where_the_layout_and_the_readers_look(tmp_path):
    run_dir = GepaRunLayout.runs_folder("owner/reverse-text", "org/m", cwd=tmp_path) / "20260102-090000-abc123"
    assert run_dir.relative_to(tmp_path).parts[:3] == ("outputs", "gepa", "owner--reverse-text--org--m")
    run = GepaRunDir.create(run_dir, {"env_id": "owner/reverse-text", "model": "org/m", "reflection_model": "big"})
    state = SearchState(seed=0, num_train=4)
    state.candidates = [Candidate(0, "seed prompt", None, [0.5, 1.0], 0, 2),
                        Candidate(1, "better prompt", 0, [1.0, 1.0], 1, 6)]
    for candidate in state.candidates:
        run.save_candidate(candidate)
    run.save_iteration({"iteration": 1, "parent_idx": 0, "accepted": True, "child_idx": 1, "metric_calls": 6})
    run.save_progress(state, {"a", "b", "c"})

    layout = GepaRunLayout(run_dir)
    for path in (layout.metadata_path, layout.candidates_path, layout.iterations_path, layout.frontier_path,
                 layout.best_prompt_path, layout.state_path, layout / GepaRunLayout.SYSTEM_PROMPT):
        assert path.is_file(), path
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".")]  # no temporary file left
    assert is_gepa_run(run_dir) and folder_kind(run_dir) == "gepa"
    loaded = read_gepa_run(run_dir)
    assert [c.idx for c in loaded.candidates] == [0, 1] and loaded.best_idx == 1
    assert loaded.best_prompt_text() == "better prompt" and loaded.frontier_counts() == {0: 1, 1: 2}
    assert loaded.metadata["num_candidates"] == 2 and loaded.iterations[0]["child_idx"] == 1
    entry = read_entry(run_dir)
    assert entry.kind == "gepa" and entry.size_text == "2 cand." and entry.avg_reward == 1.0

    resumed, resumed_state = GepaRunDir.open(run_dir)
    assert [c.idx for c in resumed_state.candidates] == [0, 1] and resumed.metadata["status"] == "running"


def test_a_gepa_run_in_an_earlier_format_loads(tmp_path):
    """verifiers' GEPA folder (no candidates.jsonl, no status) and an older prime run whose candidate
    lines lack val_mean and discovered_at_calls, written as those versions wrote them."""
    old = tmp_path / "outputs" / "gepa" / "reverse-text--m" / "20250101-000000-aaa111"
    old.mkdir(parents=True)
    (old / "metadata.json").write_text(json.dumps({"num_candidates": 2, "best_idx": 1, "best_score": 0.8,
                                                   "total_metric_calls": 40, "completed_at": "2025-01-01"}))
    (old / "best_prompt.txt").write_text("Reverse it.")
    (old / "pareto_frontier.jsonl").write_text(
        json.dumps({"valset_row": 0, "best_score": 1.0, "num_best_prompts": 1,
                    "best_prompts": [{"candidate_idx": 1, "system_prompt": "Reverse it.", "score": 1.0}]}) + "\n")
    run = read_gepa_run(old)
    assert run.status == "completed" and run.candidates == [] and run.best_idx == 1
    assert run.best_prompt_text() == "Reverse it." and run.frontier_counts() == {1: 1}
    assert is_gepa_run(old) and [e.kind for e in discover_runs([tmp_path])] == ["gepa"]

    older = tmp_path / "older"
    older.mkdir()
    (older / "metadata.json").write_text(json.dumps({"env_id": "e", "model": "m", "reflection_model": "r"}))
    (older / "candidates.jsonl").write_text(
        json.dumps({"candidate_idx": 0, "system_prompt": "s", "parent_idx": None, "val_scores": [0, 1]}) + "\n"
        + json.dumps({"candidate_idx": 1, "system_prompt": "t", "parent_idx": 0, "val_scores": [1, 1]}) + "\n")
    run = read_gepa_run(older)
    assert [c.val_mean for c in run.candidates] == [0.5, 1.0] and run.best_idx == 1 and run.lineage(1) == [0, 1]
    assert run.best_prompt_text() == "t" and read_entry(older).kind == "gepa"
