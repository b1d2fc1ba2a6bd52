"""Run overview: metrics (mean, 95% interval, std), pass@k and pass^k, reward histogram, error kinds, tokens, timing, config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from prime_cli.records.eval_run import MetadataRecord, Summary
from prime_cli.results.cost import cost_text
from prime_cli.results.intervals import shown_bounds
from prime_cli.runs.visible import json_visible, visible, visible_data
from prime_cli.tui.model import RunModel
from prime_cli.tui.rows import histogram, reward_of
from prime_cli.tui.style import fmt, short_date, status_text

HELP = """The summary of one eval run. While a run is still being written (status running) the
numbers follow it as rows are appended. Press r or enter for the rollouts table."""
CONFIG_KEYS = ("env_args", "sampling_args", "base_url", "num_examples", "rollouts_per_example", "sandbox", "state_columns",
               "tools", "reward_functions", "independent_scoring", "rescored_from", "version_info")


def _table(*headers: str) -> Table:
    table = Table(box=None, padding=(0, 2, 0, 0), show_header=True, header_style="bold")
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right")
    return table


def _interval(record: Any) -> str:
    bounds = shown_bounds(record)
    return "–" if bounds is None else f"[{fmt(bounds[0])}, {fmt(bounds[1])}]"


def _interval_note(intervals: dict) -> Text:
    reward = intervals.get("reward")
    if not isinstance(reward, dict):
        return Text("")
    examples, rollouts = reward.get("examples"), reward.get("rollouts")
    kind = (f"clustered by example, {examples} examples" if isinstance(examples, int) and isinstance(rollouts, int)
            and rollouts > examples else f"{rollouts} rollouts")
    return Text(f"95% CI of the mean ({kind}); std is the spread of single rollouts", style="dim")


def metric_table(summary: Summary) -> Group:
    intervals = summary.get("ci95") or {}
    metric_cis = intervals.get("metrics") or {}
    table = _table("metric", "mean", "95% CI", "std")
    table.add_row(Text("reward", style="bold"), fmt(summary.get("avg_reward")), _interval(intervals.get("reward")),
                  fmt(summary.get("std_reward")))
    stds = summary.get("std_metrics") or {}
    for name, mean in (summary.get("avg_metrics") or {}).items():
        table.add_row(name, fmt(mean), _interval(metric_cis.get(name)), fmt(stds.get(name)))
    return Group(table, _interval_note(intervals))


def pass_table(summary: Summary) -> Table:
    """pass@k (one of k rollouts passes) and pass^k (all k pass) side by side, each with its 95% CI."""
    cis = summary.get("ci95") or {}
    at_cis, hat_cis = cis.get("pass_at_k") or {}, cis.get("pass_hat_k") or {}
    hat = summary.get("pass_hat_k") or {}
    table = _table("k", "pass@k", "95% CI", "pass^k", "95% CI")
    for k, value in (summary.get("pass_at_k") or {}).items():
        table.add_row(str(k), fmt(value), _interval(at_cis.get(str(k))), fmt(hat.get(str(k))),
                      _interval(hat_cis.get(str(k))))
    return table


def histogram_view(rewards: list[float], width: int = 30) -> Group | Text:
    bins = histogram(rewards, bins=10)
    if not bins:
        return Text("no rows yet", style="dim")
    top = max(count for _, _, count in bins) or 1
    lines = []
    for low, high, count in bins:
        bar = "█" * round(count / top * width)
        lines.append(Text.assemble(f"{low:7.3f}–{high:<7.3f} ", (bar, "cyan"), f" {count}"))
    return Group(*lines)


def errors_view(summary: Summary) -> Table | Text:
    kinds = summary.get("error_kinds") or {}
    failed = summary.get("metrics_errors") or {}
    if not kinds and not failed:
        return Text(f"no errors (error rate {fmt(summary.get('avg_error'))})", style="green")
    table = _table("error kind", "rollouts")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        table.add_row(Text(kind, style="red"), str(count))
    for func, count in failed.items():
        table.add_row(Text(f"reward fn {func} raised", style="yellow"), str(count))
    return table


def cost_line(metadata: MetadataRecord) -> Text:
    """The run's dollar cost (metadata.json `cost`, written when the run stops)."""
    text = cost_text(metadata.get("cost"))
    if text is None:
        running = metadata.get("status") == "running"
        return Text("when the run stops" if running else "not recorded", style="dim")
    return Text(text, style="yellow" if text.startswith("unknown") else "")


def usage_view(summary: Summary, metadata: MetadataRecord | None = None) -> Table:
    usage, timing = summary.get("usage") or {}, summary.get("timing") or {}
    table = _table("", "")
    table.show_header = False
    table.add_row("rollouts", fmt(summary.get("num_rollouts")))
    if metadata is not None:
        table.add_row("cost", cost_line(metadata))
    table.add_row("prompt tokens", f"{fmt(usage.get('prompt_tokens'))} (avg {fmt(usage.get('avg_prompt_tokens'), 1)})")
    table.add_row("completion tokens", f"{fmt(usage.get('completion_tokens'))} (avg {fmt(usage.get('avg_completion_tokens'), 1)})")
    table.add_row("generation", f"{fmt(timing.get('avg_generation_ms'), 0)} ms")
    table.add_row("scoring", f"{fmt(timing.get('avg_scoring_ms'), 0)} ms")
    table.add_row("total p50 / p95", f"{fmt(timing.get('p50_total_ms'), 0)} / {fmt(timing.get('p95_total_ms'), 0)} ms")
    stops = summary.get("stop_conditions") or {}
    for stop, count in stops.items():
        table.add_row(f"stop: {stop}", str(count))
    return table


def config_view(metadata: MetadataRecord) -> Table:
    table = _table("", "")
    table.show_header = False
    table.columns[1].justify = "left"
    for key in CONFIG_KEYS:
        if key in metadata:
            value = metadata[key]
            if key == "rescored_from" and isinstance(value, dict):  # the source run's id first, then its path
                value = f"{Path(str(value.get('run'))).name} ({value.get('run')}, {value.get('date')})"
            table.add_row(key, visible(value, multiline=True) if isinstance(value, str)
                          else json_visible(json.dumps(value, ensure_ascii=False)))  # JSON escapes C0 itself
    source = metadata.get("source")  # another tool's run, opened through its converted copy (foreign_runs.py)
    if isinstance(source, dict):
        table.add_row("source", visible(f"{source.get('format')}: {source.get('path')}", multiline=True))
    return table


class OverviewScreen(Screen):
    HELP_TITLE = "run overview"
    HELP_TEXT = HELP
    BINDINGS = [Binding("r,enter", "rollouts", "Rollouts")]

    def __init__(self, run_dir: Path, model: RunModel | None = None) -> None:
        super().__init__()
        self.model = model or RunModel(run_dir)
        self.seen_version = -1

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="title", classes="title")
        with VerticalScroll():
            with Grid(id="overview-grid"):
                yield Static(id="metrics", classes="card")
                yield Static(id="passk", classes="card")
                yield Static(id="histogram", classes="card")
                yield Static(id="errors", classes="card")
                yield Static(id="usage", classes="card")
                yield Static(id="config", classes="card")
        yield Footer()

    def _title(self) -> Text:
        meta = self.model.metadata
        n, r = meta.get("num_examples"), meta.get("rollouts_per_example")
        return Text.assemble(
            (self.model.title, "bold"), "  ", status_text(self.model.status),
            visible(f"  {short_date(str(meta.get('date', '')))}  {n}x{r}  {len(self.model)} rows saved"),
        )

    def on_mount(self) -> None:
        for card, title in (("metrics", "metrics"), ("passk", "pass@k / pass^k"), ("histogram", "reward histogram"),
                            ("errors", "errors"), ("usage", "cost, tokens and timing"), ("config", "configuration")):
            self.query_one(f"#{card}").border_title = title
        self.render_cards()
        self.call_after_refresh(self.load)  # paint first: the load competes for the GIL
        self.set_interval(self.app.live_interval, self.follow)

    @work(thread=True, exclusive=True, group="load")
    def load(self) -> None:
        self.model.load_all()
        self.app.call_from_thread(self.render_cards)
        self.model.save_index()

    @work(thread=True, exclusive=True, group="summary")
    def summarize(self) -> None:
        """The summary of every row, off the UI thread (seconds for 100,000 rows)."""
        self.model.summary()
        self.app.call_from_thread(self.render_cards)

    def on_screen_resume(self) -> None:
        if self.model.loaded:
            self.render_cards()

    def follow(self) -> None:
        if self.model.catch_up(self.seen_version):
            self.render_cards()

    def render_cards(self) -> None:
        self.seen_version = self.model.version
        self.query_one("#title", Static).update(self._title())
        summary = self.model.summary(compute=False)
        if self.model.loaded and not self.model.summary_ready and self.app.screen is self:
            self.summarize()  # not while the rollouts screen opened on top of it is loading
        self.query_one("#config", Static).update(config_view(self.model.metadata))
        if summary is None:
            for card in ("metrics", "passk", "errors", "usage"):
                self.query_one(f"#{card}", Static).update(Text("loading…", style="dim"))
        else:
            summary = visible_data(summary)  # task, metric, error and stop names from the run
            self.query_one("#metrics", Static).update(metric_table(summary))
            self.query_one("#passk", Static).update(pass_table(summary))
            self.query_one("#errors", Static).update(errors_view(summary))
            self.query_one("#usage", Static).update(usage_view(summary, visible_data(self.model.metadata)))
        rewards = [reward_of(row) for row in self.model.slim if not row.get("error")] if self.model.loaded else []
        self.query_one("#histogram", Static).update(
            histogram_view(rewards) if self.model.loaded else Text("loading…", style="dim"))

    def action_rollouts(self) -> None:
        from prime_cli.tui.screens.rollouts import RolloutsScreen  # lazy: start-up

        self.app.push_screen(RolloutsScreen(self.model))
