"""A training run's header lives in its manifest, prime-train.json (prime_cli/records/training_folder.py):
a new manifest starts with the versioned header, a manifest of format version 0 ("prime train") is still
a prime run's, and the status the launcher records is what the reader shows once the lock is free."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from prime_cli.records.header import FORMAT_VERSION
from prime_cli.records.training_folder import (
    FolderLock,
    read_manifest,
    set_manifest_status,
    write_manifest,
)
from prime_cli.records.training_run import read_training_run, watch_key
from prime_cli.results.eval_reader import training_entry
from prime_cli.runs.layouts import TrainingRunLayout
from prime_cli.runs.status import RunStatus

FIXTURES = Path(__file__).parent.parent / "fixtures" / "records"
HEADER_KEYS = ["format_version", "kind", "run_id", "status", "created_at", "finished_at", "error"]


def _manifest(layout: TrainingRunLayout) -> dict:
    return json.loads(layout.manifest_path.read_text(encoding="utf-8"))


def _training_folder(tmp_path: Path, max_steps: int = 4, trained: int = 1) -> TrainingRunLayout:
    layout = TrainingRunLayout(tmp_path / "run")
    layout.output_dir.mkdir(parents=True)
    layout.config_path.write_text(json.dumps({"max_steps": max_steps}))
    layout.metrics_path.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, trained + 1)))
    return layout


def test_a_new_manifest_starts_with_the_header_then_what_it_owns(tmp_path):
    layout = TrainingRunLayout(tmp_path / "run")
    write_manifest(layout, "20260101-000000-abc123")
    manifest = _manifest(layout)
    assert list(manifest) == [*HEADER_KEYS, "owns"]
    assert manifest["format_version"] == FORMAT_VERSION and manifest["kind"] == "training"
    assert manifest["run_id"] == "20260101-000000-abc123" and manifest["status"] == "running"
    assert manifest["created_at"].endswith("+00:00") and manifest["finished_at"] is None
    assert read_manifest(layout) == manifest


def test_a_manifest_of_format_version_0_is_still_a_prime_runs_and_another_kind_is_not(tmp_path):
    layout = TrainingRunLayout(Path(shutil.copytree(FIXTURES / "training-v0", tmp_path / "v0")))
    assert read_manifest(layout)["kind"] == "prime train"
    header = read_training_run(layout.output_dir).header
    assert header["format_version"] == 0 and header["kind"] == "training"
    assert header["run_id"] == "20260103-100000-aaa111" and header["created_at"].startswith("2026-")
    layout.manifest_path.write_text(json.dumps({**_manifest(layout), "kind": "something else"}))
    assert read_manifest(layout) is None
    layout.manifest_path.write_text(json.dumps({"format_version": 1, "kind": "eval", "run_id": "x"}))
    assert read_manifest(layout) is None


def test_the_status_the_launcher_records_has_its_finish_time_and_one_line_of_error(tmp_path):
    layout = TrainingRunLayout(tmp_path / "run")
    write_manifest(layout)
    set_manifest_status(layout, RunStatus.FAILED, "trainer failed: CUDA out of memory\n  Traceback ...\n")
    manifest = _manifest(layout)
    assert manifest["status"] == "failed" and manifest["error"] == "trainer failed: CUDA out of memory"
    assert manifest["finished_at"].endswith("+00:00") and list(manifest) == [*HEADER_KEYS, "owns"]
    set_manifest_status(layout, RunStatus.RUNNING)  # resumed
    manifest = _manifest(layout)
    assert manifest["status"] == "running" and manifest["finished_at"] is None and manifest["error"] is None


def test_a_manifest_of_format_version_0_is_left_as_written(tmp_path):
    layout = TrainingRunLayout(Path(shutil.copytree(FIXTURES / "training-v0", tmp_path / "v0")))
    before = layout.manifest_path.read_bytes()
    set_manifest_status(layout, RunStatus.COMPLETED)
    assert layout.manifest_path.read_bytes() == before


def test_the_lock_says_running_and_the_header_how_the_run_ended(tmp_path):
    layout = _training_folder(tmp_path, max_steps=4, trained=1)
    write_manifest(layout)
    lock = FolderLock.acquire(layout)
    set_manifest_status(layout, RunStatus.FAILED, "orchestrator failed")  # written, lock not yet released
    assert read_training_run(layout.output_dir).status == RunStatus.RUNNING
    lock.release()
    run = read_training_run(layout.output_dir)
    assert run.status == RunStatus.FAILED and run.header["error"] == "orchestrator failed"
    set_manifest_status(layout, RunStatus.STOPPED, "stopped by Ctrl-C")
    assert read_training_run(layout.output_dir).status == RunStatus.STOPPED


def test_a_run_killed_with_sigkill_says_running_in_its_header_and_reads_stopped(tmp_path):
    layout = _training_folder(tmp_path, max_steps=4, trained=2)
    write_manifest(layout)
    FolderLock.acquire(layout).release()  # the kernel drops the lock of a killed process
    assert _manifest(layout)["status"] == "running"
    assert read_training_run(layout.output_dir).status == RunStatus.STOPPED


def test_the_browser_dates_a_training_run_by_its_header(tmp_path):
    layout = _training_folder(tmp_path)
    write_manifest(layout)
    layout.manifest_path.write_text(json.dumps({**_manifest(layout), "created_at": "2026-02-03T04:05:06+00:00"}))
    assert training_entry(layout.output_dir).date == "2026-02-03T04:05:06+00:00"
    layout.manifest_path.unlink()  # a folder without a manifest: when it was last written
    assert training_entry(layout.output_dir).date.startswith("20")


def test_a_recorded_end_changes_what_the_training_screen_watches(tmp_path):
    layout = _training_folder(tmp_path)
    write_manifest(layout)
    before = watch_key(layout.output_dir)
    os.utime(layout.manifest_path, ns=(1, 1))  # a rewrite within the same clock tick still differs
    set_manifest_status(layout, RunStatus.COMPLETED)
    assert watch_key(layout.output_dir) != before
