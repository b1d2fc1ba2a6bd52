"""VirtualTable's columns are measured in terminal cells: wide characters (CJK, emoji) take two."""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import App, ComposeResult

from prime_cli.tui.widgets.virtual_table import Column, VirtualTable

ROWS = [[("日本", ""), ("ab", ""), ("tail", "")],
        [("7", ""), ("日本語", ""), ("tail", "")],
        [("日本語です", ""), ("x", ""), ("tail", "")]]


class OneTable(App):
    def compose(self) -> ComposeResult:
        yield VirtualTable([Column("名前", 5, "right"), Column("列", 3), Column("rest", 0)], ROWS.__getitem__, len(ROWS))


def cells(strip) -> list[str]:
    """The line cut into its columns (5 cells, a space, 3 cells, a space, the rest) by cell position."""
    text, out, used = "".join(segment.text for segment in strip), [], 0
    for width in (5, 1, 3, 1):
        taken = ""
        while cell_len(taken) < width:
            taken, text = taken + text[0], text[1:]
        assert cell_len(taken) == width, (taken, used)
        out.append(taken)
        used += width
    return [*out, text]


async def test_right_aligned_and_padded_columns_count_cells_not_characters():
    app = OneTable()
    async with app.run_test(size=(30, 6)):
        table = app.query_one(VirtualTable)
        lines = [table.render_line(y) for y in range(4)]
    assert all(strip.cell_length == 30 for strip in lines)
    assert cells(lines[0])[:4] == [" 名前", " ", "列 ", " "]
    assert cells(lines[1])[:4] == [" 日本", " ", "ab ", " "]
    assert cells(lines[2])[:4] == ["    7", " ", "日…", " "]
    assert cells(lines[3])[:4] == ["日本…", " ", "x  ", " "]
    assert all(cells(line)[4].startswith("tail") for line in lines[1:])
