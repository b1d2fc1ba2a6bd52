"""Small formatting helpers shared by the screens (numbers, dates, statuses, deltas)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text

from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible

STATUS_STYLES = {RunStatus.RUNNING: "bold yellow", RunStatus.COMPLETED: "green", RunStatus.CANCELLED: "magenta",
                 RunStatus.FAILED: "bold red", RunStatus.COMPLETED_WITH_ERRORS: "bold red"}
STATUS_LABELS = {RunStatus.COMPLETED_WITH_ERRORS: "errors"}  # finished, above its error budget (fits the status column)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return visible(value)  # a value from a run's files: control characters escaped


def delta_style(value: float | None) -> str:
    if value is None:
        return "dim"
    return "green" if value > 1e-9 else "red" if value < -1e-9 else "dim"


def signed(value: float | None, digits: int = 3) -> Text:
    return Text("–" if value is None else f"{value:+.{digits}f}", style=delta_style(value))


def short_date(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError):
        return visible(str(iso or "")[:16])


def status_text(status: RunStatus | str) -> Text:
    """A status read from a file may be one this version does not know: shown as written, unstyled."""
    return Text(visible(STATUS_LABELS.get(status, str(status))), style=STATUS_STYLES.get(status, ""))


def reward_style(reward: float | None, high: float = 1.0) -> str:
    if reward is None:
        return "dim"
    if reward >= high:
        return "green"
    return "red" if reward <= 0 else "yellow"
