"""A run with a truncated last line, and a run that is still being written (live mode)."""

import json

from prime_cli.tui.app import make_app
from prime_cli.tui.screens.overview import OverviewScreen
from prime_cli.tui.screens.rollouts import RolloutsScreen
from prime_cli.tui.widgets.virtual_table import VirtualTable
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.fixtures import append_rows, eval_row, finish_run, rows_for, write_eval_run


async def test_truncated_last_line_is_left_out_and_the_rest_shows(tmp_path):
    run_dir = write_eval_run(tmp_path, rows_for(3, 2), truncated_tail='{"example_id": 9, "rollout_idx": 0, "prompt": [{"ro')
    app = make_app(run_dir / "results.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RolloutsScreen) and screen.query_one(VirtualTable).count == 6
        assert {screen.model.row(i)["example_id"] for i in screen.order} == {0, 1, 2}
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen) and "6 rows saved" in screen_text(app)


async def test_running_run_follows_appended_rows_then_its_final_status(tmp_path):
    rows = rows_for(4, 2)
    run_dir = write_eval_run(tmp_path, rows[:3], status="running")
    app = make_app(run_dir / "results.jsonl", live_interval=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        table = screen.query_one(VirtualTable)
        assert table.count == 3 and "running" in screen_text(app)
        # a writer in the middle of a line: nothing new yet
        with (run_dir / "results.jsonl").open("a") as fh:
            line = json.dumps(rows[3])
            fh.write(line[:40])
            fh.flush()
            await pilot.pause(0.3)
            await settle(pilot)
            assert table.count == 3
            fh.write(line[40:] + "\n")
        await pilot.pause(0.3)
        await settle(pilot)
        assert table.count == 4 and "4 rollouts" in screen_text(app)
        append_rows(run_dir, rows[4:])
        finish_run(run_dir)
        await pilot.pause(0.3)
        await settle(pilot)
        assert table.count == 8 and "completed" in screen_text(app) and "running" not in screen_text(app)
        await pilot.press("q")
        await settle(pilot)
        assert "8 rows saved" in screen_text(app) and "completed" in screen_text(app)


async def test_live_filter_stays_applied_to_new_rows(tmp_path):
    run_dir = write_eval_run(tmp_path, [eval_row(0, 0, 1.0)], status="running")
    app = make_app(run_dir / "results.jsonl", live_interval=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"reward<0.5", "enter")
        await settle(pilot)
        assert app.screen.order == []
        append_rows(run_dir, [eval_row(1, 0, 0.0), eval_row(2, 0, 1.0)])
        await pilot.pause(0.3)
        await settle(pilot)
        assert [app.screen.model.row(i)["example_id"] for i in app.screen.order] == [1]


def test_catch_up_reads_a_running_run_and_says_when_a_screen_must_draw_again(tmp_path):
    from prime_cli.tui.model import RunModel

    rows = rows_for(2, 1)
    model = RunModel(write_eval_run(tmp_path, rows[:1], status="running"))
    assert not model.catch_up(-1)  # not loaded yet: the load draws the screen
    model.load_all()
    seen = model.version
    assert model.catch_up(-1) and not model.catch_up(seen)
    append_rows(model.run_dir, rows[1:])
    assert model.catch_up(seen) and len(model) == 2
    seen = model.version
    finish_run(model.run_dir)
    assert model.catch_up(seen) and not model.live
    seen = model.version
    append_rows(model.run_dir, [eval_row(5, 0, 1.0)])  # a finished run is not re-read
    assert not model.catch_up(seen) and len(model) == 2
