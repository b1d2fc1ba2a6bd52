"""A table that renders only the lines on screen, so 100,000 rows cost no more than 30.

Textual's DataTable builds every row up front; this widget asks its `source` for the cells of a
row only when that row is painted (Textual's line API). The header is always the first line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from prime_cli.runs.visible import visible

Cell = tuple[str, str]  # (text, rich style string)


@dataclass
class Column:
    title: str
    width: int  # 0 = take the remaining width
    align: str = "left"


class VirtualTable(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "Top", show=False),
        Binding("end", "jump(-1)", "Bottom", show=False),
        Binding("enter", "select", "Open"),
    ]
    COMPONENT_CLASSES = {"virtual-table--header", "virtual-table--cursor"}
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    VirtualTable > .virtual-table--header { text-style: bold; background: $panel; }
    VirtualTable > .virtual-table--cursor { background: $accent 40%; }
    """

    cursor: reactive[int] = reactive(0, always_update=True)

    class Selected(Message):
        def __init__(self, table: VirtualTable, position: int) -> None:
            super().__init__()
            self.table = table
            self.position = position

    def __init__(self, columns: list[Column], source: Callable[[int], list[Cell]], count: int = 0,
                 *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.columns = columns
        self.source = source
        self.count = count

    def set_data(self, columns: list[Column] | None = None, source: Callable[[int], list[Cell]] | None = None,
                 count: int | None = None, keep_cursor: bool = True) -> None:
        """Swap what the table shows; the cursor stays on its position when it still exists."""
        if columns is not None:
            self.columns = columns
        if source is not None:
            self.source = source
        if count is not None:
            self.count = count
        self.virtual_size = Size(self.size.width, self.count + 1)
        self.cursor = min(self.cursor, max(self.count - 1, 0)) if keep_cursor else 0
        self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, self.count + 1)

    def _widths(self) -> list[int]:
        width = self.size.width
        fixed = sum(c.width for c in self.columns) + len(self.columns) - 1
        return [c.width if c.width else max(width - fixed, 8) for c in self.columns]

    def _line(self, cells: list[Cell], base: Style) -> Strip:
        segments: list[Segment] = []
        for i, ((text, style), column, width) in enumerate(zip(cells, self.columns, self._widths(), strict=False)):
            text = visible(text.replace("\n", " "))  # cells hold models' and environments' words
            if cell_len(text) > width and width > 1:
                text = set_cell_size(text, width - 1) + "…"
            pad = width - cell_len(text)  # cells, not characters: '日本' takes four
            fitted = " " * pad + text if column.align == "right" and pad > 0 else set_cell_size(text, width)
            segments.append(Segment(fitted, base + Style.parse(style) if style else base))
            if i < len(self.columns) - 1:
                segments.append(Segment(" ", base))
        return Strip(segments).adjust_cell_length(self.size.width, base)

    def render_line(self, y: int) -> Strip:
        if y == 0:
            header = self.get_component_rich_style("virtual-table--header")
            return self._line([(c.title, "") for c in self.columns], header)
        position = self.scroll_offset.y + y - 1
        if position >= self.count:
            return Strip.blank(self.size.width, self.rich_style)
        base = self.rich_style
        if position == self.cursor and self.count:
            base = base + self.get_component_rich_style("virtual-table--cursor")
        return self._line(self.source(position), base)

    def watch_cursor(self, cursor: int) -> None:
        visible = max(self.size.height - 1, 1)
        top = self.scroll_offset.y
        if cursor < top:
            self.scroll_to(y=cursor, animate=False)
        elif cursor >= top + visible:
            self.scroll_to(y=cursor - visible + 1, animate=False)
        self.refresh()

    def move_to(self, position: int) -> None:
        self.cursor = max(0, min(position, self.count - 1))

    def action_cursor(self, step: int) -> None:
        self.move_to(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(self.size.height - 2, 1))

    def action_jump(self, position: int) -> None:
        self.move_to(self.count - 1 if position < 0 else position)

    def action_select(self) -> None:
        if self.count:
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event) -> None:
        if event.y >= 1:
            self.move_to(self.scroll_offset.y + event.y - 1)
