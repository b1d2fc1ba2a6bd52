"""`prime eval tui` as a command: --help stays light, bad paths fail cleanly, real runs open."""

import json
import subprocess
import sys

from prime_cli.tui.app import make_app
from prime_cli.tui.screens.rollouts import RolloutsScreen
from tests.evals.cli_support import only_run_dir, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer
from tests.tui.conftest import SIZE, screen_text, settle


def test_tui_help_imports_no_textual():
    code = ("import sys\nfrom prime_cli.cli.main import main\ntry:\n    main(['eval', 'tui', '--help'])\n"
            "except SystemExit:\n    pass\nprint('TEXTUAL:', 'textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "PATH" in out.stdout.upper() and "--interval" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "TEXTUAL: False"


def test_missing_path_and_empty_folder_fail_with_one_line(tmp_path):
    missing = run_prime(["eval", "tui", "nowhere"], tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("error: nowhere does not exist")
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    empty = run_prime(["eval", "tui"], tmp_path)
    assert empty.returncode == 2 and "prime eval run ENV -s" in empty.stderr and "Traceback" not in empty.stderr


async def test_a_run_written_by_prime_eval_run_opens(tmp_path):
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "4", "-r", "2", "-s"], tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path)
    meta = json.loads((run_dir / "metadata.json").read_text())
    app = make_app(cwd=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert run_dir.name in screen_text(app) and f"{meta['avg_reward']:.3f}" in screen_text(app)
        await pilot.press("enter", "r")
        await settle(pilot)
        assert isinstance(app.screen, RolloutsScreen) and len(app.screen.order) == 8
        await pilot.press("enter")
        await settle(pilot)
        assert "─ assistant ─" in screen_text(app) and "reversed_text" in screen_text(app)


def test_runs_saved_in_a_subfolder_are_found_without_a_path(tmp_path):
    """`prime eval run ... -o out` and `prime train ... -o out/train` leave no ./outputs: `prime eval tui`
    from the workspace still lists both (it looks below the working folder when ./outputs holds nothing)."""
    from tests.support.cli import TerminalSession
    from tests.tui.training_fixtures import write_training_run

    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "2", "-r", "1",
                            "-s", "-o", "out"], tmp_path)
    assert result.returncode == 0, result.stderr
    write_training_run(tmp_path / "out" / "train", steps=3, max_steps=3)
    assert not (tmp_path / "outputs").exists()
    with TerminalSession(["eval", "tui"], tmp_path) as term:
        screen = term.wait_for("reverse-text", "3 steps", "2x1")
        term.send("q")
        assert term.wait_exit() == 0, screen


def test_no_runs_names_where_it_looked_and_how_to_point_elsewhere(tmp_path):
    result = run_prime(["eval", "tui"], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: no runs under {tmp_path} (4 folders deep, {tmp_path / 'outputs'} and ")
    assert "the -o of `prime eval run` or `prime train`" in line and "`prime eval tui PATH`" in line
