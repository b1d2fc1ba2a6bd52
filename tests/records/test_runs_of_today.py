"""Runs written before the records layer (tests/fixtures/records/*-v0, one per kind, written by the code of
that time) still open: in load_run / the kind readers and in the TUI's locate."""

import shutil
from pathlib import Path

import pytest

from prime_cli.records.gepa_run import read_gepa_run
from prime_cli.records.training_run import read_training_run
from prime_cli.results.eval_run import load_run
from prime_cli.tui.locate import locate

FIXTURES = Path(__file__).parent.parent / "fixtures" / "records"


@pytest.fixture
def copy_of(tmp_path):
    def copy(name: str) -> Path:
        return Path(shutil.copytree(FIXTURES / name, tmp_path / name))
    return copy


def test_an_eval_run_of_today_loads(copy_of):
    run = load_run(copy_of("eval-v0"))
    assert run.metadata.env_id == "reverse-text" and run.metadata.status == "completed"
    assert run.metadata.date.startswith("2026-01-01")
    assert len(run.rows) == 6


def test_a_gepa_run_of_today_loads(copy_of):
    run = read_gepa_run(copy_of("gepa-v0"))
    assert [c.idx for c in run.candidates] == [0, 1, 2] and run.best_idx == 1
    assert str(run.status) == "completed"
    assert run.metadata["created_at"].startswith("2026-01-02")


def test_a_training_run_of_today_loads(copy_of):
    run = read_training_run(copy_of("training-v0"))
    assert run.trained_steps == 2 and run.max_steps == 4 and run.env_ids == ["reverse-text"]


@pytest.mark.parametrize("name", ["eval-v0", "gepa-v0", "training-v0"])
def test_the_tui_opens_each_kind_of_today(copy_of, name):
    folder = copy_of(name)
    located = locate(folder, folder.parent)
    assert located.start is not None and located.start.path == folder
