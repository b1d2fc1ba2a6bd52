"""Rollout view: the prompt and completion as a chat transcript, with reward, metrics, answer,
info and error beside it; search within it; copy (OSC 52)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from prime_cli.records.eval_rows import to_json
from prime_cli.records.eval_run import Rollout
from prime_cli.runs.visible import json_visible, visible_data
from prime_cli.tui.model import RunModel
from prime_cli.tui.rows import number
from prime_cli.tui.style import fmt, reward_style
from prime_cli.tui.text import message_text
from prime_cli.tui.widgets.transcript import Transcript

HELP = """The whole rollout: prompt and completion as a chat, tool calls and tool results as such.
/ searches the transcript (a regex; plain text works too), n and N jump between matches.
c copies the completion, y copies the whole row as JSON (OSC 52: works over ssh in most
terminals). ] and [ step to the next and previous rollout of the table you came from."""


def details_view(row: Rollout) -> Group:
    """Reward, every metric, answer, info, error, stop, timing and tokens of a row (its texts with control
    characters escaped: they come from the data set, the model and the environment)."""
    info = row.get("info")  # shown as JSON, which escapes C0 controls itself (json_visible: DEL and C1)
    row = visible_data(row, multiline=True)
    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0))
    table.add_column(style="bold")
    table.add_column()
    reward = number(row.get("reward"))
    table.add_row("reward", Text(fmt(reward), style=reward_style(reward)))
    for name, value in (row.get("metrics") or {}).items():
        table.add_row(f"  {name}", fmt(value))
    table.add_row("example", fmt(row.get("example_id")))
    table.add_row("rollout", fmt(row.get("rollout_idx")))
    if row.get("task") is not None:
        table.add_row("task", str(row.get("task")))
    table.add_row("stop", fmt(row.get("stop_condition")))
    table.add_row("truncated", fmt(bool(row.get("is_truncated"))))
    usage = row.get("token_usage") or {}
    if isinstance(usage, dict):
        table.add_row("tokens", f"{fmt(usage.get('prompt_tokens'))} in / {fmt(usage.get('completion_tokens'))} out")
    timing = row.get("timing") or {}
    if isinstance(timing, dict) and timing.get("total_ms") is not None:
        table.add_row("time", f"{fmt(timing.get('total_ms'), 0)} ms")
    parts: list[Any] = [table]
    error = row.get("error")
    if error:
        text = f"{error.get('type', 'Error')}: {error.get('message', '')}" if isinstance(error, dict) else str(error)
        parts += [Text("\nerror", style="bold red"), Text(text, style="red")]
    for failure in row.get("metrics_errors") or []:
        parts.append(Text(f"reward function failed: {failure}", style="yellow"))
    parts += [Text("\nanswer", style="bold"), Text(message_text(row.get("answer")) if not isinstance(row.get("answer"), str) else row["answer"])]
    if info:
        parts += [Text("\ninfo", style="bold"),
                  Text(json_visible(json.dumps(info, indent=2, ensure_ascii=False, default=str)))]
    return Group(*parts)


class RolloutScreen(Screen):
    HELP_TITLE = "rollout"
    HELP_TEXT = HELP
    BINDINGS = [
        Binding("slash", "search", "Search"),
        Binding("n", "next_hit(1)", "Next match", show=False),
        Binding("N", "next_hit(-1)", "Prev match", show=False),
        Binding("c", "copy_completion", "Copy completion"),
        Binding("y", "copy_row", "Copy JSON"),
        Binding("right_square_bracket", "step(1)", "Next"),
        Binding("left_square_bracket", "step(-1)", "Prev"),
        Binding("escape", "close_search", "Close search", show=False),
    ]

    def __init__(self, model: RunModel, order: list[int], position: int) -> None:
        super().__init__()
        self.model = model
        self.order = order
        self.position = position

    @property
    def row(self) -> Rollout:
        return self.model.row(self.order[self.position])

    def compose(self) -> ComposeResult:
        yield Static(id="title", classes="title")
        with Horizontal():
            yield Transcript(id="transcript")
            with VerticalScroll(id="details-box"):
                yield Static(id="details")
        yield Input(placeholder="search (regex)", id="search")
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#search", Input).display = False
        self.show()

    def show(self) -> None:
        row = self.row
        self.query_one("#title", Static).update(Text.assemble(
            (self.model.title, "bold"),
            f"  row {self.order[self.position] + 1}  ({self.position + 1} of {len(self.order)})"))
        self.query_one(Transcript).show(row.get("prompt"), row.get("completion"))
        self.query_one("#details", Static).update(details_view(row))
        self.query_one("#status", Static).update("")

    def action_step(self, step: int) -> None:
        target = self.position + step
        if 0 <= target < len(self.order):
            self.position = target
            self.show()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.display = True
        box.focus()

    def action_close_search(self) -> None:
        box = self.query_one("#search", Input)
        box.display = False
        self.query_one(Transcript).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        hits = self.query_one(Transcript).search(event.value)
        self.query_one("#status", Static).update(f"{hits} matches for {event.value!r}" if event.value else "")
        event.input.display = False
        self.query_one(Transcript).focus()

    def action_next_hit(self, step: int) -> None:
        self.query_one(Transcript).next_hit(step)

    def action_copy_completion(self) -> None:
        self.app.copy_to_clipboard(message_text(self.row.get("completion")))
        self.query_one("#status", Static).update("copied the completion to the clipboard")

    def action_copy_row(self) -> None:
        self.app.copy_to_clipboard(to_json(self.row, indent=2))
        self.query_one("#status", Static).update("copied the row (JSON) to the clipboard")
