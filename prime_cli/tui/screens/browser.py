"""Runs browser: environment -> model -> run, with status, date, average reward and size."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from prime_cli.results.eval_reader import RunEntry
from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible
from prime_cli.tui.style import fmt, short_date, status_text

HELP = """Runs found on disk, grouped by environment and model, newest first.
Enter opens a run (an eval run's overview, or a GEPA run). To compare two eval runs,
mark one with m, put the cursor on the other (or mark it too) and press c."""


class BrowserScreen(Screen):
    HELP_TITLE = "runs"
    HELP_TEXT = HELP
    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("m,space", "mark", "Mark"),
        Binding("c", "compare", "Compare"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, entries: list[RunEntry]) -> None:
        super().__init__()
        self.entries = entries
        self.marked: list[Path] = []  # run folders, at most two, oldest mark first

    def compose(self) -> ComposeResult:
        yield Static("prime · runs", classes="title")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=False)
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        for label, width in (("", 1), ("environment", 16), ("model", 18), ("kind", 4), ("run", 22),
                             ("status", 9), ("date", 16), ("reward", 7), ("size", 8)):
            table.add_column(label, width=width, key=label or "mark")
        self.fill()
        table.focus()
        self.set_interval(self.app.live_interval * 5, self._poll)

    def fill(self) -> None:
        table = self.query_one("#runs", DataTable)
        cursor = table.cursor_row
        table.clear()
        previous = ("", "")
        for entry in self.entries:
            same_env = entry.env_id == previous[0]
            same_model = same_env and entry.model == previous[1]
            previous = (entry.env_id, entry.model)
            table.add_row(  # names from the runs' files and folders: control characters escaped
                "●" if entry.path in self.marked else "",
                "" if same_env else visible(entry.env_id),
                "" if same_model else visible(entry.model),
                "rl" if entry.kind == "training" else visible(entry.kind),  # fits the 4-wide column
                visible(entry.run_id),
                status_text(entry.status),
                short_date(entry.date),
                Text(fmt(entry.avg_reward), justify="right"),
                visible(entry.size_text),
            )
        if self.entries:
            table.move_cursor(row=min(cursor, len(self.entries) - 1))
        self._show_status()

    def _show_status(self, note: str = "") -> None:
        marks = f"  marked: {', '.join(visible(p.name) for p in self.marked)}" if self.marked else ""
        text = note or f"{len(self.entries)} runs{marks}"
        self.query_one("#status", Static).update(text)

    def _current(self) -> RunEntry | None:
        table = self.query_one("#runs", DataTable)
        return self.entries[table.cursor_row] if self.entries else None

    def action_open(self) -> None:
        entry = self._current()
        if entry is not None:
            self.app.open_run(entry)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_mark(self) -> None:
        entry = self._current()
        if entry is None:
            return
        if entry.path in self.marked:
            self.marked.remove(entry.path)
        else:
            self.marked = [*self.marked[-1:], entry.path]
        self.fill()

    def action_compare(self) -> None:
        current = self._current()
        by_path = {e.path: e for e in self.entries}
        pair = [by_path[p] for p in self.marked if p in by_path]
        if len(pair) < 2 and current is not None and current.path not in self.marked:
            pair.append(current)
        if len(pair) != 2:
            self._show_status("mark a run with m, move to another and press c to compare them")
            return
        if any(e.kind != "eval" for e in pair):
            self._show_status("only eval runs can be compared; open a GEPA run with enter")
            return
        self.app.open_compare(pair[0], pair[1])

    def action_reload(self) -> None:
        self.entries = self.app.rediscover()
        paths = {e.path for e in self.entries}
        self.marked = [p for p in self.marked if p in paths]
        self.fill()

    def _poll(self) -> None:
        if any(e.status == RunStatus.RUNNING for e in self.entries):
            self.action_reload()
