"""Pilot tests: a verifiers 0.4 run folder opened by path, and listed by the browser."""

from __future__ import annotations

import pytest

from prime_cli.tui.app import make_app
from prime_cli.tui.screens.browser import BrowserScreen
from prime_cli.tui.screens.overview import OverviewScreen
from prime_cli.tui.screens.rollouts import RolloutsScreen
from tests.support.foreign_runs import (
    expected_rewards,
    snapshot,
    write_verifiers_03_run,
    write_verifiers_04_run,
)
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.fixtures import rows_for, write_eval_run


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path / "cache"))


def mean_reward() -> float:
    """The mean of the scored rollouts: the errored one is counted, never scored as 0."""
    scored = [r for r in expected_rewards() if r is not None]
    return sum(scored) / len(scored)


async def test_a_verifiers_04_folder_opens_on_its_overview_and_rollouts(tmp_path):
    run_dir = write_verifiers_04_run(tmp_path / "vf")
    before = snapshot(run_dir)
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        text = screen_text(app)
        assert "reverse-text" in text and "gpt-4.1-mini" in text
        assert f"{mean_reward():.3f}" in text and "3x2  6 rows saved" in text
        assert "ProviderError" in text  # the errored rollout
        assert "verifiers-0.4:" in text  # where the run came from
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, RolloutsScreen)
        assert len(app.screen.order) == 6
    assert snapshot(run_dir) == before


async def test_the_browser_lists_foreign_runs_next_to_ours(tmp_path):
    outputs = tmp_path / "outputs"
    write_verifiers_04_run(outputs, env_id="reverse-text")
    write_verifiers_03_run(outputs, env_id="wordle")
    write_eval_run(tmp_path, rows_for(2, 2), env_id="math")
    app = make_app(cwd=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, BrowserScreen)
        lines = screen_text(app).splitlines()
        v04 = next(line for line in lines if "a1b2c3" in line)
        assert "reverse-text" in v04 and "3x2" in v04 and f"{mean_reward():.3f}" in v04
        v03 = next(line for line in lines if "4f2a9c" in line)
        assert "wordle" in v03 and "3x2" in v03
        assert any("math" in line for line in lines)
