"""Write the SVG screenshots of docs/screenshots/ (the same screens as the snapshot tests).

    python -m tests.tui.screenshots [OUT_DIR]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from prime_cli.tui.app import make_app
from tests.tui.conftest import SIZE, settle
from tests.tui.fixtures import rows_for, write_eval_run, write_gepa_run
from tests.tui.test_snapshots import SCREENS
from tests.tui.test_training_screens import SNAPSHOTS as TRAINING_SCREENS
from tests.tui.training_fixtures import write_training_run

DOCS = ["browser", "overview", "rollouts", "rollouts_grouped", "rollout", "compare", "side_by_side",
        "gepa_candidates", "gepa_frontier", "help"]


async def shoot(root: Path, name: str, out: Path) -> None:
    path, keys = SCREENS[name]
    app = make_app(root / path if path else None, cwd=root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        app.save_screenshot(filename=f"{name}.svg", path=str(out))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_eval_run(root, rows_for(6, 3, errors={(2, 1)}, tools=True))
        write_eval_run(root, rows_for(6, 3, rewards=lambda e, k: 1.0 if e % 2 else 0.5), model="other/m",
                       run_id="20260101-130000-aaa111", date="2026-01-01T13:00:00+00:00")
        write_gepa_run(root)
        for name in DOCS:
            asyncio.run(shoot(root, name, out))
            print(out / f"{name}.svg")
        training = write_training_run(root / "train" / "outputs", steps=6, max_steps=6, tokenizer=True)
        for name, keys in TRAINING_SCREENS.items():
            asyncio.run(shoot_keys(training, keys, out / f"{name}.svg"))
            print(out / f"{name}.svg")


async def shoot_keys(path: Path, keys: list[str], target: Path) -> None:
    app = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        app.save_screenshot(filename=target.name, path=str(target.parent))


if __name__ == "__main__":
    main()
