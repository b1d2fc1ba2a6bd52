"""SVG snapshots of every screen at a fixed terminal size (update with --snapshot-update)."""

import pytest

from prime_cli.tui.app import make_app
from tests.tui.conftest import SIZE, settle

RUN = "outputs/evals/reverse-text--m/20260101-120000-abc123"
GEPA_RUN = "outputs/gepa/reverse-text--m/20260102-090000-def456"

SCREENS = {
    "browser": (None, []),
    "overview": (RUN, []),
    "rollouts": (RUN, ["r"]),
    "rollouts_sorted_filtered": (RUN, ["r", "s", "slash", *"reward<1", "enter"]),
    "rollouts_grouped": (RUN, ["r", "g"]),
    "rollout": (RUN, ["r", "enter"]),
    "compare": (None, ["m", "down", "down", "c"]),
    "side_by_side": (None, ["m", "down", "down", "c", "down", "enter"]),
    "gepa_candidates": (GEPA_RUN, ["down", "down"]),
    "gepa_frontier": (GEPA_RUN, ["2"]),
    "help": (RUN, ["r", "question_mark"]),
}


@pytest.mark.parametrize("name", SCREENS)
def test_screen_snapshot(name, runs_root, snap_compare):
    path, keys = SCREENS[name]
    app = make_app(runs_root / path if path else None, cwd=runs_root)

    async def drive(pilot):
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=drive)
