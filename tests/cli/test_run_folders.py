"""No command writes into another command's run: a GEPA -o on an eval run, `prime eval run -R` or
`--retry-errors` on a GEPA run, an -o holding something else. Each is one `error:` line, exit 2,
no request to the model, and the folder byte-identical afterwards (no file changed, none added)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import one_error_line, run_dirs, snapshot
from tests.support.cli import run_prime


@pytest.fixture
def eval_run(saved_eval, tmp_path) -> Path:
    """A private copy of a finished eval run folder."""
    [source] = run_dirs(saved_eval)
    return Path(shutil.copytree(source, tmp_path / "eval-run"))


@pytest.fixture
def gepa_run(saved_gepa, tmp_path) -> Path:
    """A private copy of a finished GEPA run folder."""
    return Path(shutil.copytree(saved_gepa, tmp_path / "gepa-run"))


def refused(args: list[str], folder: Path, cwd: Path, scripted, *needles: str) -> str:
    before, sent = snapshot(folder), len(scripted.requests)
    line = one_error_line(run_prime(args, cwd), *needles)
    assert snapshot(folder) == before
    assert len(scripted.requests) == sent
    return line


def gepa_args(scripted, run_dir: Path) -> list[str]:
    return ["gepa", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-n", "4", "-N", "2",
            "-B", "14", "--plain", "-o", str(run_dir)]


def test_gepa_run_dir_on_an_eval_run_is_refused(eval_run, tmp_path, scripted):
    line = refused(gepa_args(scripted, eval_run), eval_run, tmp_path, scripted, str(eval_run), "eval run")
    assert "new or empty folder" in line


@pytest.mark.parametrize("flag", ["-R", "--retry-errors"])
def test_eval_resume_or_retry_on_a_gepa_run_is_refused(flag, gepa_run, tmp_path, scripted):
    line = refused(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, flag, str(gepa_run)],
                   gepa_run, tmp_path, scripted, flag, "GEPA run")
    assert "prime gepa run reverse-text" in line  # how to continue that run instead


def test_gepa_run_dir_holding_other_files_is_refused(tmp_path, scripted):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("keep me\n")
    (folder / "metadata.txt").write_text("not a run\n")
    line = refused(gepa_args(scripted, folder), folder, tmp_path, scripted, str(folder), "todo.txt")
    assert "not empty" in line


def test_gepa_run_dir_that_is_a_file_is_refused(tmp_path, scripted):
    file = tmp_path / "notes.txt"
    file.write_text("keep me\n")
    refused(gepa_args(scripted, file), file, tmp_path, scripted, str(file), "is a file")


@pytest.mark.parametrize("kind", ["eval", "gepa"])
def test_eval_output_dir_that_is_a_run_folder_is_refused(kind, eval_run, gepa_run, tmp_path, scripted):
    folder = eval_run if kind == "eval" else gepa_run
    refused(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-n", "1", "-r", "1", "-s",
             "-o", str(folder)], folder, tmp_path, scripted, "-o", str(folder), f"{'GEPA' if kind == 'gepa' else 'eval'} run")


def test_eval_output_dir_that_is_a_file_is_refused(tmp_path, scripted):
    file = tmp_path / "notes.txt"
    file.write_text("keep me\n")
    refused(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-n", "1", "-r", "1", "-s",
             "-o", str(file)], file, tmp_path, scripted, "-o", "is a file")


def test_eval_output_dir_may_hold_other_files_and_keeps_them(tmp_path, scripted):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me\n")
    result = run_prime(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-n", "1", "-r", "1",
                        "-s", "-o", str(folder)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert (folder / "notes.txt").read_text() == "keep me\n"
    assert len(run_dirs(folder)) == 1


def test_gepa_run_dir_that_is_empty_starts_a_run(tmp_path, scripted):
    folder = tmp_path / "fresh"
    folder.mkdir()
    result = run_prime(gepa_args(scripted, folder), tmp_path)
    assert result.returncode == 0, result.stderr
    assert (folder / "state.json").is_file() and (folder / "best_prompt.txt").is_file()
