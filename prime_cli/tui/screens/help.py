"""`?`: the keys of the screen underneath, with what they do."""

from __future__ import annotations

import re

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


def _bindings(owner: object) -> list[Binding]:
    found = []
    for cls in type(owner).__mro__:
        if not cls.__module__.startswith("prime_cli"):
            continue  # Textual's own keys (focus cycling, ctrl+q) are not ours to explain
        for item in cls.__dict__.get("BINDINGS", []):
            found.append(item if isinstance(item, Binding) else Binding(*item))
    return found


def key_table(screen: Screen) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    table.add_column("key")
    table.add_column("does")
    seen: set[str] = set()
    for binding in [*_bindings(screen), *_bindings(screen.app)]:
        if binding.description and binding.action not in seen:
            seen.add(binding.action)
            keys = ", ".join(screen.app.get_key_display(Binding(k.strip(), "")) for k in binding.key.split(","))
            table.add_row(keys, binding.description)
    return table


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", show=False)]

    def __init__(self, under: Screen) -> None:
        super().__init__(classes="help")
        self.under = under

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(f"[b]Keys · {getattr(self.under, 'HELP_TITLE', 'this screen')}[/b]\n")
            # HELP_TEXT is wrapped in the source; let the box wrap it instead
            text = re.sub(r"(?<!\n)\n(?!\n)", " ", getattr(self.under, "HELP_TEXT", ""))
            yield Static(text + "\n", classes="help-text", markup=False)
            yield Static(key_table(self.under))
