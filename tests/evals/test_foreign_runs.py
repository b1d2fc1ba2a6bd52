"""Run folders other tools wrote (verifiers 0.4 and 0.3), opened through the installed `prime`:
export, compare, the one-line error for an unknown folder, and the user's folder left untouched."""

from __future__ import annotations

import json
import statistics

import pytest

from prime_cli.records.json_lines import JsonLinesError
from prime_cli.results.eval_run import load_run
from prime_cli.results.foreign_runs import detect_format
from tests.support.cli import run_prime
from tests.support.foreign_runs import (
    ERRORED,
    expected_rewards,
    reward_of,
    snapshot,
    write_verifiers_03_run,
    write_verifiers_04_run,
)
from tests.tui.fixtures import rows_for, write_eval_run


def cache_env(tmp_path):
    return {"PRIME_CACHE_DIR": str(tmp_path / "cache")}


def exported_rows(tmp_path, run_dir):
    out = tmp_path / "out.jsonl"
    done = run_prime(["eval", "export", str(run_dir), "-f", "jsonl", "-o", str(out)], tmp_path, cache_env(tmp_path))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_verifiers_04_folder_exports_as_our_rows(tmp_path):
    run_dir = write_verifiers_04_run(tmp_path / "vf")
    before = snapshot(run_dir)
    rows = exported_rows(tmp_path, run_dir)
    assert [row["reward"] for row in rows] == expected_rewards()
    assert [(row["example_id"], row["rollout_idx"]) for row in rows] == [(e, k) for e in range(3) for k in range(2)]
    good = rows[0]
    assert good["metrics"] == {"lcs": reward_of(0, 0), "length": float(len("alpha beta"))}
    assert good["prompt"] == [{"role": "system", "content": "Reverse the text."},
                              {"role": "user", "content": "alpha beta"}]
    assert good["completion"] == [{"role": "assistant", "content": "ateb ahpla"}]
    assert good["token_usage"] == {"prompt_tokens": 20, "completion_tokens": 4}
    assert good["timing"] == {"generation_ms": 1500.0, "scoring_ms": 250.0, "total_ms": 1750.0}
    # what has no place in our row stays visible
    assert good["info"]["judge"] == "none"
    assert good["info"]["source_fields"]["task_data"] == {"example_id": 0, "difficulty": "easy"}
    assert good["info"]["source_fields"]["agent"]["config"]["model"] == "gpt-4.1-mini"
    errored = rows[ERRORED[0] * 2 + ERRORED[1]]
    assert errored["error"] == {"type": "ProviderError", "message": "502 from upstream"}
    assert snapshot(run_dir) == before


def test_the_converted_copy_names_its_source_and_is_remade_when_the_source_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path / "cache"))
    run_dir = write_verifiers_04_run(tmp_path / "vf")
    run = load_run(run_dir)
    assert run.path != run_dir and str(run.path).startswith(str(tmp_path / "cache"))
    source = run.metadata.model_extra["source"]
    assert source["path"] == str(run_dir.resolve()) and source["format"] == "verifiers-0.4"
    assert run.metadata.env_id == "reverse-text" and run.metadata.model == "gpt-4.1-mini"
    assert run.metadata.rollouts_per_example == 2 and run.metadata.num_examples == 3
    assert run.metadata.status == "completed_with_errors"
    assert run.metadata.model_extra["verifiers_config"]["sampling"] == {"temperature": 0.2}
    scored = [r for r in expected_rewards() if r is not None]
    assert abs(run.metadata.avg_reward - sum(scored) / len(scored)) < 1e-9  # the errored rollout is left out
    mtime = (run.path / "results.jsonl").stat().st_mtime_ns
    assert load_run(run_dir).path == run.path and (run.path / "results.jsonl").stat().st_mtime_ns == mtime
    with (run_dir / "traces.jsonl").open("a") as fh:  # one more rollout of example 0
        fh.write((run_dir / "traces.jsonl").read_text().splitlines()[0] + "\n")
    assert len(load_run(run_dir).rows) == 7


def test_a_verifiers_03_folder_maps_their_field_names(tmp_path):
    run_dir = write_verifiers_03_run(tmp_path / "vf03")
    assert detect_format(run_dir) == "verifiers-0.3"
    assert detect_format(write_eval_run(tmp_path / "ours", rows_for(2, 2))) is None  # ours is read as it is
    before = snapshot(run_dir)
    rows = exported_rows(tmp_path, run_dir)
    assert [row["rollout_idx"] for row in rows] == [0, 1] * 3
    assert [row["reward"] for row in rows] == [0.0 if r is None else r for r in expected_rewards()]
    assert rows[0]["token_usage"] == {"prompt_tokens": 12, "completion_tokens": 3}
    assert rows[0]["timing"] == {"generation_ms": 1000.0, "scoring_ms": 500.0, "total_ms": 1500.0}
    assert "lcs_reward" not in rows[0]["info"].get("source_fields", {})  # their top-level metric copy
    errored = rows[ERRORED[0] * 2 + ERRORED[1]]
    assert errored["error"] == {"type": "ModelError", "message": "rate limited"}
    assert errored["info"]["source_fields"]["long_error_chain"] == "ModelError: rate limited"
    assert snapshot(run_dir) == before


def test_compare_a_verifiers_04_folder_with_one_of_ours(tmp_path):
    ours = write_eval_run(tmp_path / "ours", rows_for(3, 2, lambda e, k: 0.5), model="gpt-4.1-mini")
    theirs = write_verifiers_04_run(tmp_path / "vf")
    done = run_prime(["eval", "compare", str(ours), str(theirs / "traces.jsonl"), "--json"], tmp_path,
                     cache_env(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["b"] == str(theirs.resolve())  # the folder the user named, not its converted copy
    per_example = [statistics.mean(r for k in range(2) if (r := reward_of(e, k)) is not None) for e in range(3)]
    assert abs(result["reward"]["difference"] - (statistics.mean(per_example) - 0.5)) < 1e-9


def test_compare_two_foreign_folders(tmp_path):
    a, b = write_verifiers_03_run(tmp_path / "a"), write_verifiers_04_run(tmp_path / "b")
    done = run_prime(["eval", "compare", str(a), str(b)], tmp_path, cache_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("reward: ") for line in done.stdout.splitlines())


def test_a_folder_of_no_known_format_is_one_error_line(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "traces.jsonl").write_text("{}\n")  # no resolved config next to it
    before = snapshot(folder)
    for args in (["eval", "export", str(folder), "-f", "jsonl"], ["eval", "compare", str(folder), str(folder)],
                 ["eval", "view", str(folder)]):
        done = run_prime(args, tmp_path, cache_env(tmp_path))
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
        assert "traces.jsonl" in lines[0] and ("results.jsonl" in lines[0] or "metadata.json" in lines[0])
    assert snapshot(folder) == before
    assert not (tmp_path / "cache").exists()


def test_their_files_follow_the_one_torn_line_rule(tmp_path, monkeypatch):
    # issue 56: a torn last line is left out; a bad line elsewhere is an error naming file:line (both were
    # dropped silently before)
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path / "cache"))
    for run_dir, name in ((write_verifiers_04_run(tmp_path / "vf04"), "traces.jsonl"),
                          (write_verifiers_03_run(tmp_path / "vf03"), "results.jsonl")):
        lines = (run_dir / name).read_text().splitlines()
        (run_dir / name).write_text("\n".join(lines) + "\n" + lines[0][:20])
        assert len(load_run(run_dir).rows) == len(lines)
        (run_dir / name).write_text("\n".join([lines[0], "[1, 2]", *lines[1:]]) + "\n")
        with pytest.raises(JsonLinesError, match=rf"{name}:2: "):
            load_run(run_dir)
        (run_dir / name).write_text("\n".join([lines[0], lines[1][:20], *lines[2:]]) + "\n")
        with pytest.raises(JsonLinesError, match=rf"{name}:2: "):
            load_run(run_dir)
