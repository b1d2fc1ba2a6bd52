"""The TUI application and `make_app()`, the one factory used by the CLI, the tests and benchmarks."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from prime_cli.results.eval_reader import RunEntry, discover_runs
from prime_cli.tui.locate import Located, locate


class PrimeTui(App):
    CSS_PATH = "prime.tcss"
    TITLE = "prime eval tui"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("q", "back", "Back/Quit"),
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(self, located: Located, live_interval: float = 1.0) -> None:
        super().__init__()
        self.entries = located.entries
        self.start = located.start
        self.roots = located.roots
        self.rows_first = located.rows_first
        self.live_interval = live_interval

    def on_mount(self) -> None:
        from prime_cli.tui.screens.browser import BrowserScreen  # lazy: start-up

        if self.start is not None:
            self.open_run(self.start, rows_first=self.rows_first)
        else:
            self.push_screen(BrowserScreen(self.entries))

    def rediscover(self) -> list[RunEntry]:
        self.entries = discover_runs(self.roots) if self.roots else self.entries
        return self.entries

    def open_run(self, entry: RunEntry, rows_first: bool = False) -> None:
        if entry.kind == "training":
            from prime_cli.tui.screens.training import TrainingScreen  # lazy: start-up

            self.push_screen(TrainingScreen(entry.path))
        elif entry.kind == "gepa":
            from prime_cli.tui.screens.gepa import GepaScreen  # lazy: start-up

            self.push_screen(GepaScreen(entry.path))
        else:
            from prime_cli.tui.screens.overview import OverviewScreen  # lazy: start-up

            overview = OverviewScreen(entry.path)
            self.push_screen(overview)
            if rows_first:
                overview.action_rollouts()

    def open_compare(self, a: RunEntry, b: RunEntry) -> None:
        from prime_cli.tui.screens.compare import CompareScreen  # lazy: start-up

        self.push_screen(CompareScreen(a.path, b.path))

    def action_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()
        else:
            self.exit()

    def action_help(self) -> None:
        from prime_cli.tui.screens.help import HelpScreen  # lazy: start-up

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))


def make_app(path: str | Path | None = None, cwd: str | Path | None = None, live_interval: float = 1.0,
             located: Located | None = None) -> PrimeTui:
    """The app for `prime eval tui [PATH]`: PATH may be one run folder (opened directly) or any
    folder holding runs; without it, `./environments/*/outputs` and `./outputs` are searched.
    `located` is `locate(path, cwd)` when the caller already has it (the CLI checks the path before
    Textual is imported). Raises RunDirError (NoRunsError) for a PATH that holds no run."""
    return PrimeTui(located if located is not None else locate(path, cwd), live_interval)

