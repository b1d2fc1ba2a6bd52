"""The one atomic writer every run file goes through (prime_cli/runs/atomic.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from prime_cli.runs.atomic import (
    write_atomic,
    write_json_atomic,
    write_jsonl_atomic,
    write_text_atomic,
)


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_new_file_is_readable_by_others_and_an_old_one_keeps_its_mode(tmp_path):
    fresh = tmp_path / "metadata.json"
    write_json_atomic(fresh, {"status": "running", "model": "héllo"}, indent=2)
    assert json.loads(fresh.read_text(encoding="utf-8")) == {"status": "running", "model": "héllo"}
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # mkstemp alone would leave 0o600
    os.chmod(fresh, 0o600)
    write_text_atomic(fresh, "second\n", durable=True)
    assert fresh.read_text() == "second\n" and stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert leftovers(tmp_path) == []


def test_a_writer_that_fails_leaves_the_old_file_whole_and_no_temporary_file(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"a": 1}\n')

    def half_then_fail(fh):
        fh.write(b'{"a": 2}\n{"a"')
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomic(path, half_then_fail)
    assert path.read_text() == '{"a": 1}\n'
    assert leftovers(tmp_path) == []


def test_jsonl_writes_one_line_a_row_and_strings_for_what_json_cannot_hold(tmp_path):
    path = tmp_path / "batch.jsonl"
    write_jsonl_atomic(path, [{"input_ids": [1]}, {"path": tmp_path}])
    lines = path.read_text().splitlines()
    assert lines[0] == '{"input_ids": [1]}' and json.loads(lines[1]) == {"path": str(tmp_path)}
    with pytest.raises(FileNotFoundError):  # no folder is created behind the caller's back
        write_text_atomic(tmp_path / "missing" / "x.txt", "x")


def test_a_durable_write_fsyncs_the_file_before_the_rename_and_its_folder_after(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    path.write_text("old")
    real_fsync, synced = os.fsync, []

    def fsync(fd):
        info = os.fstat(fd)
        synced.append(("folder" if stat.S_ISDIR(info.st_mode) else "file", info.st_ino, path.read_text()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_text_atomic(path, "new", durable=True)
    assert [(kind, seen) for kind, _, seen in synced] == [("file", "old"), ("folder", "new")]
    assert synced[1][1] == tmp_path.stat().st_ino  # the folder that holds the renamed entry
    synced.clear()
    write_text_atomic(path, "newer")
    assert synced == []  # not durable: no fsync at all
