"""`prime eval tui` through the installed script in a pseudo-terminal: it opens, shows runs, `q` quits."""

from __future__ import annotations

import pytest

from tests.cli.conftest import run_dirs
from tests.support.cli import TerminalSession, run_prime

pytest.importorskip("pexpect")
pytest.importorskip("pyte")


def _open_and_quit(args: list[str], cwd, *expect: str, presses: int = 1) -> str:
    with TerminalSession(args, cwd) as term:
        screen = term.wait_for(*expect)
        for _ in range(presses):
            term.send("q")
        code = term.wait_exit()
        raw = term.raw.decode(errors="replace")
    assert "Traceback" not in raw, raw[-3000:]
    assert code == 0, screen
    return screen


def test_tui_without_argument_lists_saved_runs(saved_eval):
    _open_and_quit(["eval", "tui"], saved_eval, "scripted-model", "reverse-text", "completed")


def test_view_is_the_same_browser(saved_eval):
    _open_and_quit(["eval", "view"], saved_eval, "scripted-model", "reverse-text", "completed")


def test_tui_opens_a_run_folder_directly(saved_eval):
    run_dir = run_dirs(saved_eval)[0]
    _open_and_quit(["eval", "tui", str(run_dir)], saved_eval, "lcs_reward", "reverse-text", presses=2)


def test_tui_opens_results_jsonl_on_its_rows(saved_eval):
    run_dir = run_dirs(saved_eval)[0]
    _open_and_quit(["eval", "tui", str(run_dir / "results.jsonl")], saved_eval, "reward", presses=3)


def test_tui_on_a_folder_of_runs(saved_eval):
    _open_and_quit(["eval", "tui", "outputs"], saved_eval, "scripted-model")


def test_tui_with_no_runs_is_one_line_and_exit_2(tmp_path):
    result = run_prime(["eval", "tui"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: no runs under") and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_tui_opens_a_gepa_run(tmp_path, scripted):
    result = run_prime(["gepa", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-B", "20",
                        "-n", "4", "-N", "4", "--plain", "-o", "gepa-run"], tmp_path)
    assert result.returncode == 0, result.stderr
    _open_and_quit(["eval", "tui", "gepa-run"], tmp_path, "Reverse the text", "GEPA · reverse-text", presses=2)


def test_a_saved_run_has_its_index_and_the_tui_sorts_and_filters_it(saved_eval):
    from prime_cli.records.eval_rows import read_results
    from prime_cli.results.row_index import load_index

    run_dir = run_dirs(saved_eval)[0]
    found = load_index(run_dir)  # written by `prime eval run` when the run ended
    rows = read_results(run_dir)
    assert found is not None and len(found.columns) == len(rows) == 6
    assert [found.columns.row(i)["reward"] for i in range(6)] == [row["reward"] for row in rows]
    low = sum(1 for row in rows if (row["reward"] or 0) < 0.5)
    with TerminalSession(["eval", "tui", str(run_dir / "results.jsonl")], saved_eval) as term:
        term.wait_for("6 rollouts", "completed")
        term.send("s")
        term.wait_for("sorted by reward ↓")
        term.send("/")
        term.send("reward<0.5\r")
        screen = term.wait_for(f"{low:,} rollouts  filter: reward<0.5")
        for _ in range(3):
            term.send("q")
        assert term.wait_exit() == 0, screen
        assert "Traceback" not in term.raw.decode(errors="replace")


def test_tui_opens_a_training_run_folder(tmp_path):
    from tests.tui.training_fixtures import write_training_run

    write_training_run(tmp_path / "outputs", steps=3, max_steps=3)
    screen = _open_and_quit(["eval", "tui", "outputs"], tmp_path, "training · reverse-text", "step 3/3 trained",
                            "reward mean per step")
    assert "completed" in screen
