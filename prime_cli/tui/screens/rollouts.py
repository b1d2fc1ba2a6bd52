"""Rollouts table: every row of results.jsonl, virtualised; sort, filter, group repeats of an example."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from prime_cli.results.summary import error_kind
from prime_cli.runs.visible import visible
from prime_cli.tui.filters import FilterError, RowFilter, parse_filter
from prime_cli.tui.model import RunModel
from prime_cli.tui.rows import ExampleGroup, group_examples, number, sort_keys
from prime_cli.tui.style import fmt, reward_style, status_text
from prime_cli.tui.text import last_reply
from prime_cli.tui.widgets.virtual_table import Cell, Column, VirtualTable

HELP = """One line per rollout, in file order until you sort. s cycles the sort column (reward, each
metric, example, tokens, time, error), S flips the direction. / opens the filter: reward<0.5,
error, not error, metrics.correct==1, text~regex, task==math; join terms with `and` / `or`.
g groups the repeats of each example (mean, min, max reward); enter on a group shows its rollouts."""
MAX_METRIC_COLUMNS = 4


class RolloutsScreen(Screen):
    HELP_TITLE = "rollouts"
    HELP_TEXT = HELP
    BINDINGS = [
        Binding("enter", "open", "Open", show=False),
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse", "Reverse"),
        Binding("slash,f", "filter", "Filter"),
        Binding("g", "group", "Group"),
        Binding("escape", "clear", "Clear", show=False),
    ]

    def __init__(self, model: RunModel, row_filter: str = "") -> None:
        super().__init__()
        self.model = model
        self.metrics = model.metric_names()
        self.sort_keys = sort_keys(self.metrics)
        self.sort_key, self.descending = "row", False
        self.row_filter: RowFilter | None = parse_filter(row_filter) if row_filter else None
        self.grouped = False  # what the user asked for
        self.view_grouped = False  # what the table shows now (the regrouping runs in a thread)
        self.order: list[int] | None = None  # row numbers shown, None = file order of what is indexed
        self.groups: list[ExampleGroup] = []
        self.note = ""
        self.seen_version = -1

    def compose(self) -> ComposeResult:
        yield Static(Text(self.model.title, style="bold"), classes="title")
        yield VirtualTable(self._columns(), self._row_cells, id="rollouts")
        yield Input(placeholder="filter: reward<0.5 and not error · metrics.NAME==1 · text~regex", id="filter")
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        self.model.open_first()
        table = self.query_one(VirtualTable)
        table.set_data(count=len(self.model))
        table.focus()
        self.query_one("#filter", Input).display = False
        if self.row_filter is not None:
            self.query_one("#filter", Input).value = self.row_filter.expression
        self._status()
        self.call_after_refresh(self.load)  # paint first: the load competes for the GIL
        self.set_interval(self.app.live_interval, self.follow)

    # data -------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="load")
    def load(self) -> None:
        self.model.load_all(progress=lambda i, n: self.app.call_from_thread(self._status, f"reading rows {i:,}/{n:,}"))
        self.app.call_from_thread(self.rebuild)
        self.model.save_index()

    def follow(self) -> None:
        if self.model.catch_up(self.seen_version):
            self.rebuild()

    def rebuild(self) -> None:
        """Recompute the rows shown after a sort, filter, group change or new rows (in a thread:
        a text filter over 100,000 rows reads the whole file)."""
        if not self.model.loaded:
            self._status("still reading the file; sort, filter and group wait for it")
            return
        self.seen_version = self.model.version
        self._select(self.row_filter, self.sort_key, self.descending, self.grouped)

    @work(thread=True, exclusive=True, group="select")
    def _select(self, row_filter: RowFilter | None, sort_key: str, descending: bool, grouped: bool) -> None:
        order = self.model.select(row_filter, sort_key, descending)
        groups = group_examples(self.model.slim, order) if grouped else []
        self.app.call_from_thread(self._show, order, groups, grouped)

    def _show(self, order: list[int], groups: list[ExampleGroup], grouped: bool) -> None:
        self.order, self.groups, self.view_grouped = order, groups, grouped
        table = self.query_one(VirtualTable)
        table.set_data(columns=self._columns(), count=len(groups) if grouped else len(order))
        self._status()

    def _status(self, note: str = "") -> None:
        self.note = note
        shown = len(self.groups) if self.view_grouped else (len(self.order) if self.order is not None else len(self.model))
        unit = "examples" if self.view_grouped else "rollouts"
        parts = [Text(f"{shown:,} {unit}")]
        if self.row_filter is not None:
            parts.append(Text(visible(f"  filter: {self.row_filter.expression}"), style="cyan"))
        if self.sort_key != "row":
            parts.append(Text(visible(f"  sorted by {self.sort_key} {'↓' if self.descending else '↑'}")))
        parts += [Text("  "), status_text(self.model.status)]
        if note:
            parts.append(Text(f"  {note}", style="yellow"))
        self.query_one("#status", Static).update(Text.assemble(*parts))

    # table ------------------------------------------------------------------------------------
    def _columns(self) -> list[Column]:
        metrics = [Column(self._metric_title(m), max(7, min(len(m), 12)), "right") for m in self.metrics[:MAX_METRIC_COLUMNS]]
        if self.view_grouped:
            return [Column("example", 8, "right"), Column("n", 4, "right"), Column("mean", 7, "right"),
                    Column("min", 7, "right"), Column("max", 7, "right"), Column("errors", 6, "right"),
                    Column("first completion", 0)]
        return [Column("#", 6, "right"), Column("example", 8, "right"), Column("rollout", 7, "right"),
                Column(self._metric_title("reward", "reward"), 7, "right"), *metrics, Column("error", 12),
                Column("tokens", 6, "right"), Column("completion", 0)]

    def _metric_title(self, name: str, key: str | None = None) -> str:
        key = key or f"metrics.{name}"
        mark = ("↓" if self.descending else "↑") if self.sort_key == key else ""
        return f"{mark}{name}"

    def _row_number(self, position: int) -> int:
        return self.order[position] if self.order is not None else position

    def _row_cells(self, position: int) -> list[Cell]:
        if self.view_grouped:
            return self._group_cells(self.groups[position])
        i = self._row_number(position)
        row = self.model.row(i)
        reward = number(row.get("reward"))
        metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
        usage = row.get("token_usage") if isinstance(row.get("token_usage"), dict) else {}
        kind = error_kind(row.get("error")) or ""
        return [
            (str(i + 1), "dim"), (fmt(row.get("example_id")), ""), (fmt(row.get("rollout_idx")), ""),
            (fmt(reward), reward_style(reward)),
            *((fmt(metrics.get(m)), "") for m in self.metrics[:MAX_METRIC_COLUMNS]),
            (kind, "red" if kind else ""), (fmt(usage.get("completion_tokens")), ""),
            (last_reply(row.get("completion")), ""),
        ]

    def _group_cells(self, group: ExampleGroup) -> list[Cell]:
        first = self.model.row(group.indices[0])
        return [
            (fmt(group.example_id), ""), (str(len(group.indices)), ""), (fmt(group.mean), reward_style(group.mean)),
            (fmt(min(group.rewards, default=None)), ""), (fmt(max(group.rewards, default=None)), ""),
            (str(group.errors) if group.errors else "", "red"), (last_reply(first.get("completion")), ""),
        ]

    # actions ----------------------------------------------------------------------------------
    def on_virtual_table_selected(self, event: VirtualTable.Selected) -> None:
        event.stop()
        self.open_position(event.position)

    def action_open(self) -> None:
        self.open_position(self.query_one(VirtualTable).cursor)

    def open_position(self, position: int) -> None:
        if self.view_grouped:
            group = self.groups[position]
            expression = f"example_id=={group.example_id}"
            if self.row_filter is not None:
                expression = f"{self.row_filter.expression} and {expression}"
            screen = RolloutsScreen(self.model, expression)
            self.app.push_screen(screen)
            return
        order = self.order if self.order is not None else list(range(len(self.model)))
        if not order:
            return
        from prime_cli.tui.screens.rollout import RolloutScreen  # lazy: start-up

        self.app.push_screen(RolloutScreen(self.model, order, position))

    def action_sort(self) -> None:
        at = self.sort_keys.index(self.sort_key) if self.sort_key in self.sort_keys else 0
        self.sort_key = self.sort_keys[(at + 1) % len(self.sort_keys)]
        self.descending = self.sort_key not in ("row", "example_id")  # best first for scores
        self.rebuild()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.rebuild()

    def action_group(self) -> None:
        self.grouped = not self.grouped
        self.query_one(VirtualTable).cursor = 0
        self.rebuild()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display and box.has_focus:
            box.display = False
            self.query_one(VirtualTable).focus()
            return
        if self.row_filter is not None:
            self.row_filter = None
            box.value = ""
            self.rebuild()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            self.row_filter = parse_filter(event.value)
        except FilterError as exc:
            self._status(f"filter: {exc}")
            return
        event.input.display = False
        table = self.query_one(VirtualTable)
        table.focus()
        table.cursor = 0
        self.rebuild()
