"""The versioned header of metadata.json (records/header.py): a new eval and GEPA run's file starts with it,
a status that ends the run sets finished_at, and each run of today's formats (v0) reads with a derived one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prime_cli.evals.store import RunStore
from prime_cli.gepa.run_dir import GepaRunDir
from prime_cli.records.header import FORMAT_VERSION, Header, read_header
from prime_cli.results.eval_reader import read_entry
from prime_cli.runs.status import RunStatus

FIXTURES = Path(__file__).parent.parent / "fixtures" / "records"
HEADER_KEYS = list(Header.__annotations__)


def _metadata(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text(encoding="utf-8"))


def _is_utc_iso(value: object) -> bool:
    return isinstance(value, str) and value.endswith("+00:00")


def test_a_new_eval_runs_metadata_starts_with_the_header_and_keeps_date(tmp_path):
    run_dir = tmp_path / "20260101-120000-abc123"
    store = RunStore.create_at(run_dir, {"env_id": "e", "model": "m", "num_examples": 1, "rollouts_per_example": 1})
    meta = _metadata(run_dir)
    assert list(meta)[:len(HEADER_KEYS)] == HEADER_KEYS
    assert meta["format_version"] == FORMAT_VERSION and meta["kind"] == "eval" and meta["run_id"] == run_dir.name
    assert meta["status"] == "running" and _is_utc_iso(meta["created_at"]) and meta["finished_at"] is None
    assert meta["date"] and meta["env_id"] == "e"
    store.update_metadata(status=RunStatus.COMPLETED)
    store.close()
    meta = _metadata(run_dir)
    assert list(meta)[:len(HEADER_KEYS)] == HEADER_KEYS and _is_utc_iso(meta["finished_at"])
    assert read_entry(run_dir).kind == "eval"


def test_a_new_gepa_runs_metadata_starts_with_the_header_and_keeps_its_keys(tmp_path):
    run_dir = tmp_path / "20260102-090000-def456"
    run = GepaRunDir.create(run_dir, {"env_id": "e", "model": "m", "reflection_model": "r"})
    meta = _metadata(run_dir)
    assert list(meta)[:len(HEADER_KEYS)] == HEADER_KEYS
    assert meta["kind"] == "gepa" and meta["run_id"] == run_dir.name and meta["status"] == "running"
    assert _is_utc_iso(meta["created_at"]) and meta["completed_at"] is None and meta["reflection_model"] == "r"
    run.write_metadata(status=RunStatus.FAILED, completed_at="2026-01-02T10:00:00+01:00", error="boom")
    meta = _metadata(run_dir)
    assert list(meta)[:len(HEADER_KEYS)] == HEADER_KEYS
    assert _is_utc_iso(meta["finished_at"]) and meta["error"] == "boom" and meta["completed_at"]
    assert read_header(meta, lambda: pytest.fail("a run with a header is not sniffed"))["status"] == "failed"


def test_a_run_made_from_another_runs_metadata_gets_its_own_header(tmp_path):
    """A rescore copies its source's metadata.json: the new run's header is its own, not the source's."""
    source = tmp_path / "source"
    store = RunStore.create_at(source, {"env_id": "e", "model": "m"})
    store.update_metadata(status=RunStatus.COMPLETED)
    store.close()
    copy = tmp_path / "copy"
    RunStore.create_at(copy, _metadata(source)).close()
    meta = _metadata(copy)
    assert list(meta)[:len(HEADER_KEYS)] == HEADER_KEYS
    assert meta["run_id"] == "copy" and meta["status"] == "running" and meta["finished_at"] is None


def test_the_header_names_the_kind_so_an_eval_is_not_sniffed_as_gepa(tmp_path):
    run_dir = tmp_path / "run"
    RunStore.create_at(run_dir, {"env_id": "e", "model": "m", "reflection_model": "an env arg named so"}).close()
    assert read_entry(run_dir).kind == "eval"


@pytest.mark.parametrize(("name", "file", "kind", "created", "finished"), [
    ("eval-v0", "metadata.json", "eval", "2026-01-01T12:00:00+00:00", None),
    ("gepa-v0", "metadata.json", "gepa", "2026-01-02T09:00:00+00:00", "2026-01-02T09:05:00+00:00"),
    ("training-v0", "prime-train.json", "training", None, None),
])
def test_each_run_of_today_reads_with_a_derived_header(name, file, kind, created, finished):
    meta = json.loads((FIXTURES / name / file).read_text(encoding="utf-8"))
    header = read_header(meta, lambda: kind, run_id=name)
    assert header["format_version"] == 0 and header["kind"] == kind and header["finished_at"] == finished
    assert header["run_id"] == meta.get("run_id", name)
    if created:
        assert header["created_at"] == created
    else:  # a training manifest's created_at is epoch seconds
        assert _is_utc_iso(header["created_at"])
