"""Compare two eval runs: joined on example_id, paired reward deltas, "only changed", and the two
completions of an example side by side."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from prime_cli.results.compare import setting_differences
from prime_cli.runs.visible import visible
from prime_cli.tui.model import RunModel
from prime_cli.tui.rows import Comparison, ExampleGroup, PairedExample, compare
from prime_cli.tui.style import delta_style, fmt, reward_style, signed
from prime_cli.tui.text import last_reply
from prime_cli.tui.widgets.transcript import Transcript
from prime_cli.tui.widgets.virtual_table import Cell, Column, VirtualTable

HELP = """Run A (marked first) against run B, joined on example_id. Each line is one example: the
mean reward over its rollouts in A and in B (errored rollouts left out, and counted above) and
the paired delta B − A. The verdict line is the
one `prime eval compare A B` prints: the mean paired difference with its 95% interval and the
p-value of a paired t-test on per-example means (errored rollouts left out); "no detectable
difference" means the interval includes 0. o shows only the examples whose reward changed;
s sorts by the delta. enter shows the two completions side by side."""


def _mean_cell(group: ExampleGroup | None) -> Cell:
    if group is None:
        return "–", "dim"
    mean = group.scored_mean
    return (fmt(mean), reward_style(mean)) if mean is not None else ("errored", "red")


class CompareScreen(Screen):
    HELP_TITLE = "compare runs"
    HELP_TEXT = HELP
    BINDINGS = [
        Binding("o", "only_changed", "Only changed"),
        Binding("s", "sort", "Sort by delta"),
        Binding("enter", "open", "Side by side", show=False),
    ]

    def __init__(self, run_a: Path, run_b: Path) -> None:
        super().__init__()
        self.a, self.b = RunModel(run_a), RunModel(run_b)
        self.comparison: Comparison | None = None
        self.only_changed = False
        self.by_delta = False
        self.shown: list[PairedExample] = []

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("A ", "bold cyan"), self.a.title, "\n", ("B ", "bold magenta"), self.b.title),
                     classes="title")
        yield Static("reading both runs…", id="compare-stats", classes="card")
        yield Static("", id="compare-verdict")
        yield VirtualTable([Column("example", 8, "right"), Column("A", 7, "right"), Column("B", 7, "right"),
                            Column("B − A", 7, "right"), Column("n A", 4, "right"), Column("n B", 4, "right"),
                            Column("A completion", 0), Column("B completion", 0)], self._cells, id="pairs")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(VirtualTable).focus()
        self.call_after_refresh(self.load)  # paint first: the load competes for the GIL

    @work(thread=True, exclusive=True, group="load")
    def load(self) -> None:
        self.a.load_all()
        self.b.load_all()
        comparison = compare(self.a.slim, self.b.slim)
        self.app.call_from_thread(self._loaded, comparison)
        self.a.save_index()
        self.b.save_index()

    def _loaded(self, comparison: Comparison) -> None:
        self.comparison = comparison
        self.query_one("#compare-verdict", Static).update(self.verdict(comparison))
        self.rebuild()

    def verdict(self, comparison: Comparison) -> Text:
        """The verdict line of `prime eval compare`, and its warnings."""
        env_a, env_b = self.a.metadata.get("env_id"), self.b.metadata.get("env_id")
        if env_a != env_b:
            return Text(visible(f"A is a run of {env_a!r} and B of {env_b!r}: no verdict across environments"),
                        style="yellow")
        paired = comparison.paired()
        if paired is None:
            return Text("no example scored in both runs: no verdict", style="yellow")
        text = paired.verdict()
        style = "green" if text.startswith("B is better") else "red" if text.startswith("B is worse") else ""
        line = Text.assemble(("reward: ", "bold"), (text, style))
        for warning in setting_differences(self.a.metadata, self.b.metadata):
            line.append("\n")
            line.append(visible(f"warning: {warning}"), style="yellow")
        return line

    def rebuild(self) -> None:
        if self.comparison is None:
            return
        pairs = self.comparison.pairs
        if self.only_changed:
            pairs = [p for p in pairs if p.changed]
        if self.by_delta:
            pairs = sorted(pairs, key=lambda p: (p.delta is None, p.delta or 0.0))
        self.shown = pairs
        self._widths()
        self.query_one(VirtualTable).set_data(count=len(pairs))
        stats = self.comparison.stats()
        self.query_one("#compare-stats", Static).update(Text.assemble(
            f"{stats['joined']} examples in both runs · mean delta ", signed(stats["mean_delta"]),
            f" · B better on {stats['better']}, worse on {stats['worse']}, same on {stats['same']}",
            f" · only in A: {stats['only_a']}, only in B: {stats['only_b']}",
            (f" · errored rollouts left out: {stats['errored_a']} in A, {stats['errored_b']} in B"
             if stats["errored_a"] or stats["errored_b"] else ""),
            ("  [only changed]" if self.only_changed else "", "cyan"),
            ("  [sorted by delta]" if self.by_delta else "", "cyan"),
        ))

    def _widths(self) -> None:
        # Two flexible columns share the space: give the first a fixed half.
        table = self.query_one(VirtualTable)
        half = max((table.size.width - 47) // 2, 10)
        table.columns[6].width = half

    def _cells(self, position: int) -> list[Cell]:
        pair = self.shown[position]
        a_reply = last_reply(self.a.row(pair.a.indices[0]).get("completion")) if pair.a else ""
        b_reply = last_reply(self.b.row(pair.b.indices[0]).get("completion")) if pair.b else ""
        delta = pair.delta
        return [
            (fmt(pair.example_id), ""),
            _mean_cell(pair.a), _mean_cell(pair.b),
            (signed(delta).plain, delta_style(delta)),
            (str(len(pair.a.indices)) if pair.a else "0", ""), (str(len(pair.b.indices)) if pair.b else "0", ""),
            (a_reply, ""), (b_reply, ""),
        ]

    def on_resize(self) -> None:
        if self.comparison is not None:
            self._widths()

    def action_only_changed(self) -> None:
        self.only_changed = not self.only_changed
        self.query_one(VirtualTable).cursor = 0
        self.rebuild()

    def action_sort(self) -> None:
        self.by_delta = not self.by_delta
        self.rebuild()

    def on_virtual_table_selected(self, event: VirtualTable.Selected) -> None:
        event.stop()
        self.open(event.position)

    def action_open(self) -> None:
        self.open(self.query_one(VirtualTable).cursor)

    def open(self, position: int) -> None:
        if position < len(self.shown):
            self.app.push_screen(SideBySideScreen(self.a, self.b, self.shown[position]))


class SideBySideScreen(Screen):
    HELP_TITLE = "side by side"
    HELP_TEXT = "One example in run A (left) and run B (right). ] and [ step through its rollouts."
    BINDINGS = [Binding("right_square_bracket", "step(1)", "Next rollout"),
                Binding("left_square_bracket", "step(-1)", "Prev rollout")]

    def __init__(self, a: RunModel, b: RunModel, pair: PairedExample) -> None:
        super().__init__()
        self.a, self.b, self.pair = a, b, pair
        self.rollout = 0

    def compose(self) -> ComposeResult:
        yield Static(id="title", classes="title")
        with Horizontal():
            with Vertical(classes="side"):
                yield Static(id="head-a", classes="side-head")
                yield Transcript(id="side-a")
            with Vertical(classes="side"):
                yield Static(id="head-b", classes="side-head")
                yield Transcript(id="side-b")
        yield Footer()

    def on_mount(self) -> None:
        self.show()

    def _count(self) -> int:
        return max(len(self.pair.a.indices) if self.pair.a else 0, len(self.pair.b.indices) if self.pair.b else 0)

    def show(self) -> None:
        self.query_one("#title", Static).update(Text.assemble(
            (f"example {fmt(self.pair.example_id)}", "bold"), f"  rollout {self.rollout + 1} of {self._count()}  delta ",
            signed(self.pair.delta)))
        for side, model, group in (("a", self.a, self.pair.a), ("b", self.b, self.pair.b)):
            head = self.query_one(f"#head-{side}", Static)
            transcript = self.query_one(f"#side-{side}", Transcript)
            if group is None or self.rollout >= len(group.indices):
                head.update(Text(f"{side.upper()}: no such rollout", style="dim"))
                transcript.show(None, None)
                continue
            row = model.row(group.indices[self.rollout])
            reward = row.get("reward")
            head.update(Text.assemble((f"{side.upper()} ", "bold"),
                                      visible(f"{model.metadata.get('model', '?')} · {model.run_dir.name}"), "  reward ",
                                      (fmt(reward), reward_style(reward if isinstance(reward, (int, float)) else None))))
            transcript.show(row.get("prompt"), row.get("completion"))

    def action_step(self, step: int) -> None:
        target = self.rollout + step
        if 0 <= target < self._count():
            self.rollout = target
            self.show()
