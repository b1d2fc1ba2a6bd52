"""Shared fixtures for the TUI tests: run folders on disk and helpers to drive the app."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.fixtures import rows_for, write_eval_run, write_gepa_run

SIZE = (120, 36)


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    """Two eval runs of one environment (models m and other/m) and a GEPA run."""
    write_eval_run(tmp_path, rows_for(6, 3, errors={(2, 1)}, tools=True))
    write_eval_run(tmp_path, rows_for(6, 3, rewards=lambda e, k: 1.0 if e % 2 else 0.5), model="other/m",
                   run_id="20260101-130000-aaa111", date="2026-01-01T13:00:00+00:00")
    write_gepa_run(tmp_path)
    return tmp_path


def screen_text(app) -> str:
    """The current frame as plain text, one line per terminal row."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip).rstrip() for strip in strips)


async def settle(pilot) -> None:
    """Let loads, selections and refreshes finish (workers start after the first paint)."""
    import contextlib

    from textual.worker import WorkerCancelled

    for _ in range(4):
        await pilot.pause()
        for worker in list(pilot.app.workers):
            # an exclusive worker replaced by a newer one (e.g. a second selection) ends cancelled
            with contextlib.suppress(WorkerCancelled):
                await worker.wait()
    await pilot.pause()
