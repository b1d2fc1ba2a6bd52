"""Pilot tests of one eval run: overview, rollouts table (sort, filter, group), rollout view."""

import json
import re

from prime_cli.results.intervals import clustered_interval
from prime_cli.tui.app import make_app
from prime_cli.tui.screens.overview import OverviewScreen
from prime_cli.tui.screens.rollout import RolloutScreen
from prime_cli.tui.screens.rollouts import RolloutsScreen
from prime_cli.tui.widgets.virtual_table import VirtualTable
from tests.tui.conftest import SIZE, screen_text, settle

RUN = "outputs/evals/reverse-text--m/20260101-120000-abc123"


def shown_rows(screen: RolloutsScreen) -> list[dict]:
    return [screen.model.row(i) for i in screen.order]


async def open_rollouts(pilot, path):
    await settle(pilot)
    await pilot.press("r")
    await settle(pilot)
    assert isinstance(pilot.app.screen, RolloutsScreen)
    return pilot.app.screen


async def test_path_to_a_run_opens_its_overview_with_every_section(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        text = screen_text(app)
        for title in ("metrics", "pass@k / pass^k", "reward histogram", "errors", "cost, tokens and timing",
                      "configuration"):
            assert f"─ {title} ─" in text
        rows = list(map(json.loads, (runs_root / RUN / "results.jsonl").read_text().splitlines()))
        scored = [r for r in rows if not r["error"]]  # errored rollouts are counted, never scored as 0
        assert len(scored) < len(rows)
        rewards = [r["reward"] for r in scored]
        assert f"{sum(rewards) / len(rewards):.3f}" in text
        by_example: dict = {}
        for row in scored:
            by_example.setdefault(row["example_id"], []).append(row["reward"])
        interval = clustered_interval(by_example)
        assert f"[{interval.low:.3f}, {interval.high:.3f}]" in text and interval.high - interval.low > 0.1
        assert "95% CI of the mean (clustered by example, 6 examples)" in text
        assert "ModelError" in text and "temperature" in text and "18 rows saved" in text
        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running  # a run opened directly: q quits


async def test_rollouts_table_sorts_by_reward_and_flips_with_S(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_rollouts(pilot, runs_root)
        assert [r["rollout_idx"] for r in shown_rows(screen)][:3] == [0, 1, 2]
        await pilot.press("s")  # reward, best first
        await settle(pilot)
        rewards = [r["reward"] for r in shown_rows(screen)]
        assert screen.sort_key == "reward" and rewards[0] == 1.0 and rewards[-1] is None  # missing last
        assert rewards[:-1] == sorted(rewards[:-1], reverse=True)
        await pilot.press("S")
        await settle(pilot)
        rewards = [r["reward"] for r in shown_rows(screen)]
        assert rewards[:-1] == sorted(rewards[:-1]) and rewards[-1] is None
        await pilot.press("s")  # next key: the first metric
        await settle(pilot)
        assert screen.sort_key == "metrics.lcs_reward" and "sorted by metrics.lcs_reward" in screen_text(app)


async def test_filter_expressions_and_escape_clears(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_rollouts(pilot, runs_root)
        await pilot.press("slash", *"reward<0.5 and not error", "enter")
        await settle(pilot)
        rows = shown_rows(screen)
        assert rows and all(r["reward"] < 0.5 and not r["error"] for r in rows)
        assert len(rows) == sum(1 for r in map(screen.model.row, range(18)) if r["reward"] is not None and r["reward"] < 0.5)
        await pilot.press("escape")
        await settle(pilot)
        assert len(screen.order) == 18
        await pilot.press("slash", *"text~gamma", "enter")
        await settle(pilot)
        assert {r["example_id"] for r in shown_rows(screen)} == {1}
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"error", "enter")
        await settle(pilot)
        assert [(r["example_id"], r["rollout_idx"]) for r in shown_rows(screen)] == [(2, 1)]


async def test_a_bad_filter_says_what_to_write_and_keeps_the_rows(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_rollouts(pilot, runs_root)
        await pilot.press("slash", *"rewrd<1", "enter")
        await settle(pilot)
        assert "unknown field 'rewrd'" in screen_text(app) and len(screen.order) == 18


async def test_group_repeats_then_open_one_example(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_rollouts(pilot, runs_root)
        await pilot.press("g")
        await settle(pilot)
        assert screen.view_grouped and len(screen.groups) == 6 and "6 examples" in screen_text(app)
        assert [len(g.indices) for g in screen.groups] == [3] * 6
        await pilot.press("down", "enter")
        await settle(pilot)
        inner = app.screen
        assert isinstance(inner, RolloutsScreen) and inner is not screen
        assert {r["example_id"] for r in shown_rows(inner)} == {1} and len(inner.order) == 3


async def test_rollout_view_shows_transcript_tool_calls_details_and_steps(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        await open_rollouts(pilot, runs_root)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RolloutScreen)
        text = screen_text(app)
        assert "─ system ─" in text and "─ user ─" in text and "─ assistant ─" in text
        assert "→ tool call reverse [call_1]" in text and "tool result · call_1" in text
        assert "lcs_reward" in text and "answer" in text and '"source": "fixture"' in text
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.screen.position == 1 and "row 2  (2 of 18)" in screen_text(app)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause()
        assert app.screen.position == 0


async def test_rollout_view_shows_the_error_of_a_failed_rollout(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        await open_rollouts(pilot, runs_root)
        await pilot.press("down", "down", "down", "down", "down", "down", "down", "enter")
        await settle(pilot)
        text = screen_text(app)
        assert "ModelError: server returned 500" in text and "(no completion)" in text and "stop      error" in text


async def test_search_highlights_and_copy_uses_the_clipboard(runs_root):
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        await open_rollouts(pilot, runs_root)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("slash", *"ahpla", "enter")
        await pilot.pause()
        row = app.screen.row
        expected = json.dumps(row["prompt"] + row["completion"]).count("ahpla")
        assert expected == 2 and f"{expected} matches for 'ahpla'" in screen_text(app)
        transcript = app.screen.query_one("#transcript")
        highlighted = [b for b in transcript.blocks if "on yellow" in str(b.render_text(transcript._pattern).spans)]
        assert len(highlighted) == 2
        await pilot.press("n", "N")
        await pilot.press("c")
        assert app.clipboard.endswith("<reversed_text>ateb ahpla</reversed_text>")
        assert "copied the completion" in screen_text(app)
        await pilot.press("y")
        assert json.loads(app.clipboard)["example_id"] == 0


async def test_results_jsonl_path_opens_the_rows_and_q_goes_back_to_the_overview(runs_root):
    app = make_app(runs_root / RUN / "results.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RolloutsScreen)
        assert app.screen.query_one(VirtualTable).count == 18
        await pilot.press("q")
        assert isinstance(app.screen, OverviewScreen)


async def test_the_pass_card_shows_pass_hat_k_beside_pass_at_k(tmp_path):
    from tests.tui.fixtures import eval_row, write_eval_run

    # example e passes on its first (4, 2, 0)[e] of 4 rollouts: pass^2 = (1 + 1/6 + 0) / 3, pass@2 = (1 + 5/6 + 0) / 3
    rows = [eval_row(e, k, 1.0 if k < (4, 2, 0)[e] else 0.0) for e in range(3) for k in range(4)]
    run_dir = write_eval_run(tmp_path, rows)
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "─ pass@k / pass^k ─" in text
        # the card's rows: k, pass@k, its CI, pass^k, its CI
        assert re.search(r"│ k +pass@k +95% CI +pass\^k +95% CI", text)
        assert re.search(r"│ 2 +0\.611 +\[[-0-9.]+, [-0-9.]+\] +0\.389 +\[", text)
        assert re.search(r"│ 4 +0\.667 +\[[-0-9.]+, [-0-9.]+\] +0\.333 +\[", text)


async def test_overview_configuration_names_the_sandbox_provider(runs_root):
    metadata_path = runs_root / RUN / "metadata.json"
    metadata = json.loads(metadata_path.read_text())
    metadata["sandbox"] = {"provider": "none", "isolated": False, "started": 4, "failed": 1,
                           "start_p50_s": 0.04, "start_p95_s": 0.05, "note": "unsandboxed"}
    metadata_path.write_text(json.dumps(metadata))
    app = make_app(runs_root / RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert re.search(r"sandbox\s+\{\"provider\": \"none\",", text), text
        assert "unsandboxed" in text
