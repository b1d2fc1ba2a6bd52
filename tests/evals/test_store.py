import json
import logging
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from prime_cli.envs.errors import EnvConfigError, UserInputError
from prime_cli.evals.store import (
    RunStore,
    completed_pairs,
    default_base_dir,
    errored_rows,
    find_resumable,
    list_runs,
    model_dir_name,
    state_to_row,
)
from prime_cli.records.eval_rows import iter_results, read_results
from prime_cli.records.json_lines import JsonLinesError
from prime_cli.runs.ids import new_run_id
from prime_cli.runs.metadata import RunDirError, read_metadata

ROW_KEYS = {
    "example_id", "rollout_idx", "prompt", "completion", "answer", "task", "info", "reward", "metrics",
    "error", "timing", "is_completed", "is_truncated", "stop_condition", "token_usage", "metrics_errors",
    "judge_usage",
}


def row(example_id, rollout_idx=0, **extra):
    return {"example_id": example_id, "rollout_idx": rollout_idx, "reward": 1.0, **extra}


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_model_dir_name_replaces_slashes():
    assert model_dir_name("openai/gpt-4.1-mini") == "openai--gpt-4.1-mini"
    assert model_dir_name("local") == "local"


def test_base_dir_uses_environment_folder_when_it_exists(tmp_path):
    (tmp_path / "environments" / "reverse_text").mkdir(parents=True)
    got = default_base_dir("owner/reverse-text", "openai/gpt-4o", cwd=tmp_path)
    assert got == tmp_path / "environments/reverse_text/outputs/evals/owner--reverse-text--openai--gpt-4o"


def test_base_dir_falls_back_to_cwd(tmp_path):
    (tmp_path / "environments" / "other_env").mkdir(parents=True)
    got = default_base_dir("reverse-text", "m/x", cwd=tmp_path)
    assert got == tmp_path / "outputs/evals/reverse-text--m--x"


def test_base_dir_without_cwd_is_relative_to_process_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_base_dir("reverse-text", "m") == Path("outputs/evals/reverse-text--m")
    (tmp_path / "environments" / "reverse_text").mkdir(parents=True)
    assert default_base_dir("reverse-text", "m") == Path("environments/reverse_text/outputs/evals/reverse-text--m")


def test_output_dir_replaces_outputs_evals(tmp_path):
    (tmp_path / "environments" / "reverse_text").mkdir(parents=True)
    assert default_base_dir("reverse-text", "a/b", output_dir=tmp_path / "out", cwd=tmp_path) == (
        tmp_path / "out" / "reverse-text--a--b"
    )
    assert default_base_dir("reverse-text", "a", output_dir="rel", cwd=tmp_path) == tmp_path / "rel" / "reverse-text--a"


def test_run_ids_are_formatted_unique_and_sorted_by_time():
    ids = [new_run_id() for _ in range(300)]
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert abs(datetime.strptime(ids[-1][:15], "%Y%m%d-%H%M%S") - datetime.now()).total_seconds() < 5


def test_create_writes_running_metadata_and_empty_results(tmp_path):
    base = tmp_path / "outputs" / "evals" / "env--m"
    with RunStore.create(base, {"env_id": "env", "model": "m", "status": "bogus"}) as store:
        assert store.run_dir.parent == base
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", store.run_id)
        meta = json.loads((store.run_dir / "metadata.json").read_text())
        assert meta["status"] == "running"
        assert meta["env_id"] == "env" and meta["model"] == "m"
        assert abs(datetime.fromisoformat(meta["date"]).timestamp() - datetime.now().timestamp()) < 5
        assert (store.run_dir / "results.jsonl").read_text() == ""
        assert store.log_path == store.run_dir / "eval.log"
        assert read_metadata(store.run_dir) == meta == store.metadata


def test_update_metadata_is_atomic_and_keeps_date(tmp_path):
    store = RunStore.create(tmp_path, {"env_id": "e"})
    date = store.metadata["date"]
    store.update_metadata(status="completed", avg_reward=0.5, date="1999-01-01T00:00:00")
    meta = read_metadata(store.run_dir)
    assert meta["status"] == "completed" and meta["avg_reward"] == 0.5
    assert meta["date"] == date and meta["env_id"] == "e"
    assert leftovers(store.run_dir) == []
    store.close()


def test_failed_metadata_rewrite_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    store = RunStore.create(tmp_path, {"env_id": "e"})

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.update_metadata(status="completed")
    monkeypatch.undo()
    assert read_metadata(store.run_dir)["status"] == "running"
    assert leftovers(store.run_dir) == []
    store.close()


def test_appended_rows_are_visible_to_another_reader_before_close(tmp_path):
    store = RunStore.create(tmp_path, {})
    store.append(row(0))
    store.append(row(1, 2))
    probe = f"import json; print([json.loads(x)['example_id'] for x in open({str(store.results_path)!r})])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[0, 1]"
    assert [r["rollout_idx"] for r in read_results(store.run_dir)] == [0, 2]
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.append(row(2))


def test_non_json_values_become_strings_and_nan_becomes_null(tmp_path):
    class Thing:
        def __str__(self):
            return "<thing>"

    with RunStore.create(tmp_path, {}) as store:
        store.append(row(0, reward=float("nan"), metrics={"a": float("inf"), "b": -float("inf")},
                         info={"obj": Thing(), "tags": {"x"}, (1, 2): "tuple key", "err": ValueError("bad")}))
        store.update_metadata(avg_reward=float("nan"), thing=Thing())
    text = store.results_path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    (got,) = read_results(store.run_dir)
    assert got["reward"] is None and got["metrics"] == {"a": None, "b": None}
    assert got["info"]["obj"] == "<thing>" and got["info"]["tags"] == ["x"]
    assert got["info"]["(1, 2)"] == "tuple key"
    assert got["info"]["err"] == {"type": "ValueError", "message": "bad"}
    meta = json.loads(store.metadata_path.read_text())  # strict JSON: no NaN token
    assert meta["avg_reward"] is None and meta["thing"] == "<thing>"


def test_numpy_scalars_are_stored_as_numbers(tmp_path):
    np = pytest.importorskip("numpy")
    with RunStore.create(tmp_path, {}) as store:
        store.append(row(np.int64(3), reward=np.float32(0.5), metrics={"m": np.float64("nan")}))
    (got,) = read_results(store.run_dir)
    assert got["example_id"] == 3 and got["reward"] == 0.5 and got["metrics"] == {"m": None}


def test_reader_skips_a_truncated_last_line_quietly(tmp_path, caplog):
    store = RunStore.create(tmp_path, {})
    store.append(row(0))
    store.append(row(1))
    store.close()
    with store.results_path.open("a") as fh:
        fh.write('{"example_id": 2, "rollout_i')
    with caplog.at_level(logging.WARNING, logger="prime_cli.records.eval_rows"):
        assert [r["example_id"] for r in iter_results(store.run_dir)] == [0, 1]
    assert caplog.records == []


def test_reader_refuses_an_invalid_middle_line_naming_it(tmp_path):
    # issue 56: a bad line other than a torn last one is damage, an error naming file:line (was a warning
    # and the row dropped)
    store = RunStore.create(tmp_path, {})
    store.close()
    store.results_path.write_text('{"example_id": 0}\n{not json\n\n{"example_id": 3}\n')
    with pytest.raises(JsonLinesError, match=r"results\.jsonl:2: "):
        read_results(store.run_dir)
    store.results_path.write_text('{"example_id": 0}\n\n[1, 2]\n{"example_id": 3}\n')
    with pytest.raises(JsonLinesError, match=r"results\.jsonl:3: .*expected an object"):
        read_results(store.run_dir)
    store.results_path.write_text('{"example_id": 0}\n{"example_id": 1, "rollout_i\n')
    with pytest.raises(JsonLinesError, match=r"results\.jsonl:2: "):  # a whole line (newline written) is not torn
        read_results(store.run_dir)


def test_open_repairs_a_truncated_last_line_before_appending(tmp_path):
    store = RunStore.create(tmp_path, {"env_id": "e"})
    store.append(row(0))
    store.append(row(1))
    store.close()
    with store.results_path.open("a") as fh:
        fh.write('{"example_id": 2, "prom')
    with RunStore.open(store.run_dir) as resumed:
        assert resumed.metadata["env_id"] == "e"
        assert leftovers(resumed.run_dir) == []
        resumed.append(row(2))
    raw = lines(store.results_path)
    assert [json.loads(x)["example_id"] for x in raw] == [0, 1, 2]  # every line parses
    assert store.results_path.read_text().endswith("\n")


def test_open_keeps_a_whole_last_row_missing_its_newline(tmp_path):
    store = RunStore.create(tmp_path, {})
    store.close()
    store.results_path.write_text('{"example_id": 0}\n{"example_id": 1}')
    with RunStore.open(store.run_dir) as resumed:
        resumed.append(row(2))
    assert [json.loads(x)["example_id"] for x in lines(store.results_path)] == [0, 1, 2]


def test_open_repairs_a_file_that_is_only_a_partial_line(tmp_path):
    store = RunStore.create(tmp_path, {})
    store.close()
    store.results_path.write_bytes(b'{"example_id": 0, "text": "\xc3')  # cut inside a UTF-8 char
    with RunStore.open(store.run_dir) as resumed:
        resumed.append(row(5))
    assert [json.loads(x)["example_id"] for x in lines(store.results_path)] == [5]


def test_rewrite_results_is_atomic_and_later_appends_follow(tmp_path):
    store = RunStore.create(tmp_path, {})
    for i in (2, 0, 1):
        store.append(row(i))
    rows = sorted(store.read_results(), key=lambda r: r["example_id"])
    store.rewrite_results(rows)
    store.append(row(3))
    store.close()
    assert [json.loads(x)["example_id"] for x in lines(store.results_path)] == [0, 1, 2, 3]
    assert leftovers(store.run_dir) == []


def test_failed_rewrite_keeps_old_results(tmp_path):
    store = RunStore.create(tmp_path, {})
    store.append(row(0))

    def rows():
        yield row(9)
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        store.rewrite_results(rows())
    store.append(row(1))
    store.close()
    assert [r["example_id"] for r in read_results(store.run_dir)] == [0, 1]
    assert leftovers(store.run_dir) == []


def test_list_runs_newest_first_and_only_run_folders(tmp_path):
    made = [RunStore.create(tmp_path, {"i": i}) for i in range(3)]
    for s in made:
        s.close()
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "stray.txt").write_text("x")
    legacy = tmp_path / "abc12345"  # another tool's run name; ordered by its metadata date
    legacy.mkdir()
    (legacy / "metadata.json").write_text(json.dumps({"date": "2001-01-01T00:00:00"}))
    assert list_runs(tmp_path) == [s.run_dir for s in reversed(made)] + [legacy]
    assert list_runs(tmp_path / "missing") == []


def test_find_resumable_picks_newest_unfinished_run(tmp_path):
    stores = [RunStore.create(tmp_path, {}) for _ in range(4)]
    for s, status in zip(stores, ["failed", "running", "cancelled", "completed"], strict=True):
        s.update_metadata(status=status)
        s.close()
    assert find_resumable(tmp_path) == stores[2].run_dir  # cancelled; the newest is completed
    stores[2].update_metadata(status="completed")
    assert find_resumable(tmp_path) == stores[1].run_dir
    for s in stores[:2]:
        s.update_metadata(status="completed")
    assert find_resumable(tmp_path) is None
    assert find_resumable(tmp_path / "nothing-here") is None


def test_find_resumable_ignores_runs_without_status_and_broken_metadata(tmp_path):
    old = RunStore.create(tmp_path, {})
    old.update_metadata(status="failed")
    old.close()
    no_status = RunStore.create(tmp_path, {})
    no_status.metadata.pop("status")
    no_status.update_metadata()
    broken = RunStore.create(tmp_path, {})
    broken.metadata_path.write_text("{")
    assert find_resumable(tmp_path) == old.run_dir


def test_completed_pairs_and_errored_rows():
    rows = [row(0, 0), row(0, 1, error={"type": "ModelError", "message": "x"}), row(1, 0, error=None)]
    assert completed_pairs(rows) == {(0, 0), (0, 1), (1, 0)}
    assert errored_rows(rows) == [rows[1]]


def full_state():
    return {
        "prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "assistant", "content": "yo"}],
        "answer": "yo", "task": "greet", "info": {"k": 1}, "example_id": 7, "trajectory": [{"step": 1}],
        "turn": 1, "reward": 1.0, "metrics": {"exact": 1.0}, "metrics_errors": [], "is_completed": True,
        "is_truncated": False, "stop_condition": "max_turns_reached", "error": None,
        "timing": {"generation_ms": 5.0, "scoring_ms": 1.0, "total_ms": 6.0},
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}, "secret_internal": object(),
    }


def test_state_to_row_has_exactly_the_contract_keys():
    state = full_state()
    got = state_to_row(state, 3)
    assert set(got) == ROW_KEYS
    assert got["rollout_idx"] == 3 and got["example_id"] == 7
    assert got["token_usage"] == {"prompt_tokens": 3, "completion_tokens": 2}
    assert got["stop_condition"] == "max_turns_reached" and got["metrics"] == {"exact": 1.0}
    assert got["is_completed"] is True and got["is_truncated"] is False


def test_state_to_row_adds_requested_state_columns():
    got = state_to_row(full_state(), 0, ["trajectory", "turn", "missing"])
    assert set(got) == ROW_KEYS | {"trajectory", "turn", "missing"}
    assert got["trajectory"] == [{"step": 1}] and got["turn"] == 1 and got["missing"] is None


def test_state_to_row_of_a_sparse_state_is_serialisable(tmp_path):
    got = state_to_row({"example_id": 1, "error": RuntimeError("model down")}, 0)
    assert set(got) == ROW_KEYS
    assert got["error"] == {"type": "RuntimeError", "message": "model down"}
    assert got["metrics"] == {} and got["metrics_errors"] == [] and got["reward"] is None
    with RunStore.create(tmp_path, {}) as store:
        store.append(got)
    assert read_results(store.run_dir) == [got]


def test_run_dir_errors_name_the_file(tmp_path):
    with pytest.raises(RunDirError, match="is not a directory"):
        read_metadata(tmp_path / "nope")
    with pytest.raises(RunDirError, match=re.escape(str(tmp_path / "metadata.json")) + " not found"):
        read_metadata(tmp_path)
    (tmp_path / "metadata.json").write_text("{oops")
    with pytest.raises(RunDirError, match="metadata.json is not valid JSON"):
        read_metadata(tmp_path)
    (tmp_path / "metadata.json").write_text("[1]")
    with pytest.raises(RunDirError, match="holds a JSON list"):
        read_metadata(tmp_path)
    assert issubclass(RunDirError, UserInputError) and not issubclass(RunDirError, EnvConfigError)


def test_open_and_read_refuse_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(RunDirError):
        RunStore.open(tmp_path)
    with pytest.raises(RunDirError, match="results.jsonl not found"):
        read_results(tmp_path)
    (tmp_path / "metadata.json").write_text("{}")
    assert read_results(tmp_path) == []  # a run folder whose results were never written


def test_new_files_are_readable_by_others(tmp_path):
    with RunStore.create(tmp_path, {}) as store:
        store.update_metadata(status="completed")
    assert os.stat(store.metadata_path).st_mode & 0o044 == 0o044


def test_rows_survive_sigkill_of_the_writer(tmp_path):
    code = (f"import os, signal\nfrom prime_cli.evals.store import RunStore\n"
            f"s = RunStore.create({str(tmp_path)!r}, {{}})\n"
            "for i in range(50):\n    s.append({'example_id': i, 'rollout_idx': 0, 'text': 'x' * 5000})\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    (run_dir,) = list_runs(tmp_path)
    assert [r["example_id"] for r in read_results(run_dir)] == list(range(50))
    assert read_metadata(run_dir)["status"] == "running"
    assert find_resumable(tmp_path) == run_dir
