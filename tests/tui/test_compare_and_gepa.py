"""Pilot tests of the compare screens and the GEPA screen."""

import json

from prime_cli.results.compare import compare_runs
from prime_cli.tui.app import make_app
from prime_cli.tui.screens.compare import CompareScreen, SideBySideScreen
from prime_cli.tui.screens.gepa import GepaScreen
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.fixtures import CHILD, GRANDCHILD, write_gepa_run

GEPA_RUN = "outputs/gepa/reverse-text--m/20260102-090000-def456"


async def open_compare(pilot):
    await settle(pilot)
    await pilot.press("m", "down", "down", "c")
    await settle(pilot)
    assert isinstance(pilot.app.screen, CompareScreen)
    return pilot.app.screen


def mean(values):
    return sum(values) / len(values)


async def test_compare_joins_on_example_id_with_paired_deltas(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        assert len(screen.shown) == 6
        a_rows = [screen.a.row(i) for i in range(len(screen.a))]
        b_rows = [screen.b.row(i) for i in range(len(screen.b))]
        for pair in screen.shown:  # the errored rollout (example 2 of A) is left out, not scored 0
            a = mean([r["reward"] for r in a_rows if r["example_id"] == pair.example_id and not r["error"]])
            b = mean([r["reward"] for r in b_rows if r["example_id"] == pair.example_id and not r["error"]])
            assert abs(pair.delta - (b - a)) < 1e-9
        deltas = [p.delta for p in screen.shown]
        text = screen_text(app)
        assert f"mean delta {mean(deltas):+.3f}" in text
        assert f"better on {sum(d > 0 for d in deltas)}" in text and f"same on {sum(d == 0 for d in deltas)}" in text
        assert "errored rollouts left out: 1 in A, 0 in B" in text


async def test_compare_screen_shows_the_verdict_of_prime_eval_compare(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        expected = compare_runs(str(screen.a.run_dir), str(screen.b.run_dir)).reward.verdict()
        assert "paired examples" in expected
        assert f"reward: {expected}" in screen_text(app)


async def test_only_changed_toggle_and_sort_by_delta(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        await pilot.press("o")
        assert screen.shown and all(abs(p.delta) > 1e-9 for p in screen.shown) and len(screen.shown) < 6
        assert "[only changed]" in screen_text(app)
        await pilot.press("o", "s")
        deltas = [p.delta for p in screen.shown]
        assert len(deltas) == 6 and deltas == sorted(deltas)


async def test_side_by_side_shows_both_completions_and_steps_rollouts(runs_root):
    app = make_app(cwd=runs_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        side = app.screen
        assert isinstance(side, SideBySideScreen) and side.pair.example_id == 1
        text = screen_text(app)
        a_reply = screen.a.row(side.pair.a.indices[0])["completion"][-1]["content"]
        b_reply = screen.b.row(side.pair.b.indices[0])["completion"][-1]["content"]
        assert a_reply in text and b_reply in text and "rollout 1 of 3" in text
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert side.rollout == 1 and "rollout 2 of 3" in screen_text(app)


async def test_gepa_candidates_lineage_and_diff_against_parent(runs_root):
    app = make_app(runs_root / GEPA_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, GepaScreen)
        text = screen_text(app)
        assert "★ 1" in text and "+0.250" in text and "seed prompt" in text
        await pilot.press("down", "down")
        await pilot.pause()
        text = screen_text(app)
        assert "lineage #0 → #1 → #2" in text and "diff against parent #1" in text
        assert "-Answer inside <reversed_text> tags." in text and "+Answer only inside <reversed_text> tags." in text
        await pilot.press("c")
        assert app.clipboard == GRANDCHILD


async def test_gepa_tabs_frontier_iterations_best_prompt(runs_root):
    app = make_app(runs_root / GEPA_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        frontier = [line.split() for line in screen_text(app).splitlines()
                    if line.strip()[:1].isdigit() and "Candidates" not in line]  # not the footer
        assert [row[0] for row in frontier] == ["0", "1", "2", "3"] and frontier[3][-1] == "2"
        await pilot.press("3")
        await pilot.pause()
        assert "minibatch already perfect" in screen_text(app)
        await pilot.press("4")
        await pilot.pause()
        assert "Check the first letter." in screen_text(app)
        await pilot.press("c")
        assert app.clipboard == CHILD


async def test_gepa_run_being_written_with_a_truncated_line_refreshes(tmp_path):
    run_dir = write_gepa_run(tmp_path, status="running", truncated_tail=True)
    app = make_app(run_dir, live_interval=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(app.screen.run.candidates) == 3 and "running" in screen_text(app)
        text = (run_dir / "candidates.jsonl").read_text()
        (run_dir / "candidates.jsonl").write_text(text + 'ort", "parent_idx": 2, "val_scores": [1, 1, 1, 1], "val_mean": 1.0}\n')
        await pilot.pause(0.3)
        await settle(pilot)
        assert len(app.screen.run.candidates) == 4 and "1.000" in screen_text(app)


async def test_gepa_run_that_stopped_before_its_budget_says_why(tmp_path):
    run_dir = write_gepa_run(tmp_path)
    meta = json.loads((run_dir / "metadata.json").read_text())
    reason = "the reflection model gave no new prompt to try in 3 proposals in a row (last: reflection truncated)"
    (run_dir / "metadata.json").write_text(json.dumps({**meta, "stop_reason": reason}))
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "stopped before the budget: the reflection model gave no new prompt" in screen_text(app)


async def test_gepa_run_says_how_its_final_pick_chose_the_best(tmp_path):
    run_dir = write_gepa_run(tmp_path)
    meta = json.loads((run_dir / "metadata.json").read_text())
    pick = {"method": "...", "leader_by_validation": 1, "best": 0, "score_rollouts": 4, "fresh_rollouts": 3, "duels": [
        {"leader": 1, "challenger": 0, "rows_disagreeing": 3, "rows_rerun": 3, "challenger_lead": 2.0, "won": True}]}
    (run_dir / "metadata.json").write_text(json.dumps({**meta, "pick": pick}))
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert ("final pick #0 over #1 (the best by validation): #0 vs #1 +2.0 on 3 re-rolled rows; on 4 + 3 fresh "
                "rollouts") in text, text


async def test_gepa_run_with_errored_rollouts_shows_them_left_out_never_as_zero(tmp_path):
    run_dir = write_gepa_run(tmp_path)
    meta = json.loads((run_dir / "metadata.json").read_text())
    (run_dir / "metadata.json").write_text(json.dumps({**meta, "errored_rollouts": {
        "left_out": 3, "rollouts": 30, "train": 1, "val": 2, "test": 0}}))
    candidates = [json.loads(line) for line in (run_dir / "candidates.jsonl").read_text().splitlines()]
    candidates[0].update(val_scores=[0.5, None, 1.0, None], val_mean=0.75, val_errored=2)  # rows 1 and 3 errored
    (run_dir / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in candidates))
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "errored 3/30 left out" in text
        assert "per row: 0.50 – 1.00 –  (2 errored rollouts" in text, text
        assert app.screen.run.candidates[0].val_scores == [0.5, None, 1.0, None]


async def test_gepa_candidate_validated_in_part_shows_the_rows_it_was_run_on(tmp_path):
    run_dir = write_gepa_run(tmp_path)
    candidates = [json.loads(line) for line in (run_dir / "candidates.jsonl").read_text().splitlines()]
    candidates[0].update(val_scores=[0.5, None, 1.0, None], val_mean=0.75, val_rows_run=2)  # rows 1 and 3 not run
    (run_dir / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in candidates))
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "per row: 0.50 – 1.00 –  (validated on 2 of" in text and "4 rows: what the budget left, or half" in text, text
        assert app.screen.run.candidates[0].val_rows_run == 2 and app.screen.run.candidates[1].val_rows_run is None


def test_the_gain_over_the_parent_is_taken_on_the_rows_both_were_scored_on():
    from prime_cli.tui.screens.gepa import shared_gain

    # a child validated on rows 0-1 only: compared with its parent there, not with the parent's mean over 4 rows
    assert shared_gain([1.0, 0.0, None, None], [0.0, 0.0, 1.0, 1.0]) == 0.5
    assert shared_gain([None, None], [1.0, 0.0]) is None
