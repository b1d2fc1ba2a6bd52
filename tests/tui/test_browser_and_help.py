"""Pilot tests of the runs browser and the help screen."""

from prime_cli.tui.app import make_app
from prime_cli.tui.screens.browser import BrowserScreen
from prime_cli.tui.screens.compare import CompareScreen
from prime_cli.tui.screens.gepa import GepaScreen
from prime_cli.tui.screens.help import HelpScreen
from prime_cli.tui.screens.overview import OverviewScreen
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.fixtures import rows_for, write_eval_run


async def test_browser_lists_runs_grouped_with_status_reward_and_size(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        text = screen_text(app)
        lines = [line for line in text.splitlines() if "2026010" in line]
        assert len(lines) == 3
        assert "reverse-text" in lines[0] and "eval" in lines[0] and "6x3" in lines[0] and "completed" in lines[0]
        assert "gepa" in lines[1] and "3 cand." in lines[1] and "0.750" in lines[1]
        assert "reverse-text" not in lines[1]  # same environment and model: shown once, as a group
        assert "other/m" in lines[2] and "0.750" in lines[2]


async def test_enter_opens_eval_overview_and_gepa_run_and_q_goes_back_then_quits(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("q")
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, GepaScreen)
        await pilot.press("q")
        assert isinstance(app.screen, BrowserScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_mark_and_compare_two_runs(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("m")
        assert "marked: 20260101-120000-abc123" in screen_text(app)
        await pilot.press("down", "down", "c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert app.screen.a.metadata["model"] == "m" and app.screen.b.metadata["model"] == "other/m"


async def test_compare_needs_two_eval_runs(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")
        assert isinstance(app.screen, BrowserScreen) and "mark a run with m" in screen_text(app)
        await pilot.press("m", "down", "c")
        assert isinstance(app.screen, BrowserScreen) and "only eval runs can be compared" in screen_text(app)


async def test_reload_picks_up_a_new_run(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        write_eval_run(runs_root, rows_for(2, 1), env_id="zeta-env", run_id="20260105-000000-fff000")
        await pilot.press("r")
        await pilot.pause()
        assert "zeta-env" in screen_text(app) and "4 runs" in screen_text(app)


async def test_question_mark_shows_the_keys_of_the_screen_and_closes(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "Keys · runs" in text and "Compare" in text and "Back/Quit" in text
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, BrowserScreen)
