"""RunStatus: one enum whose members read and write as the strings metadata.json holds."""

from __future__ import annotations

import json

import pytest

from prime_cli.records.eval_run import RunMetadata
from prime_cli.runs.status import FINISHED, RESUMABLE, RunStatus


def test_a_member_prints_and_serialises_as_its_value():
    status = RunStatus.COMPLETED_WITH_ERRORS
    assert (str(status), f"{status}", f"{status:>22}|", format(status)) == (
        "completed_with_errors", "completed_with_errors", " completed_with_errors|", "completed_with_errors")
    assert json.dumps({"status": RunStatus.FAILED}) == '{"status": "failed"}'


def test_plain_strings_read_from_disk_find_members_in_sets_and_dicts():
    assert "completed" in FINISHED and "failed" in RESUMABLE and "failed" not in FINISHED
    assert {RunStatus.CANCELLED: "magenta"}.get("cancelled") == "magenta"
    assert RunStatus.RUNNING == "running" and hash(RunStatus.RUNNING) == hash("running")


@pytest.mark.parametrize(("raw", "expected"), [
    ("running", RunStatus.RUNNING), (None, RunStatus.COMPLETED), ("", RunStatus.COMPLETED),
    ("paused-by-another-tool", "paused-by-another-tool"),
])
def test_read_keeps_unknown_strings_and_treats_a_missing_status_as_finished(raw, expected):
    assert RunStatus.read(raw) == expected and type(RunStatus.read(raw)) is type(expected)


def test_eval_metadata_reads_old_strings_and_refuses_a_training_status():
    record = {"env_id": "e", "model": "m", "num_examples": 1, "rollouts_per_example": 1, "status": "cancelled"}
    assert RunMetadata.from_record(record).status is RunStatus.CANCELLED
    assert RunMetadata.from_record(record).to_record()["status"] == "cancelled"
    with pytest.raises(ValueError):
        RunMetadata.from_record({**record, "status": "stopped"})
