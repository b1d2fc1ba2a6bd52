"""One training step's samples (rollouts/step_N/batch.jsonl): a table of reward, advantage and token
counts, and the selected sample's tokens: decoded when the run's tokenizer is on disk, prompt dim,
trained tokens plain, masked (environment) tokens highlighted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from prime_cli.records.training_run import (
    StepSample,
    decoder_for,
    rate_percent,
    read_step_samples,
    step_error_kinds,
    step_error_rate,
)
from prime_cli.runs.visible import visible
from prime_cli.tui.style import fmt, reward_style, signed

HELP = """The samples one training step trained on, one row each: reward, advantage (reward minus its
group's mean), the policy step whose weights sampled it, and its tokens: prompt, trained
(loss_mask 1) and masked (loss_mask 0 after the prompt: environment or tool tokens). On the right
the selected sample's text (when the model's tokenizer is on disk): prompt dim, trained tokens
plain, masked tokens on a yellow background. When some of the step's rollouts errored, the title says
how many and of which kinds: those rollouts are not among the samples (tracebacks in the run's
logs/orchestrator.log)."""

SEGMENT_STYLES = {"prompt": "dim", "trained": "", "masked": "black on yellow"}


def sample_details(sample: StepSample) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("reward", Text(fmt(sample.reward), style=reward_style(sample.reward)))
    table.add_row("advantage", signed(sample.advantage))
    table.add_row("env", visible(sample.env))
    table.add_row("example", fmt(sample.example_id))
    table.add_row("policy step", fmt(sample.policy_step))
    table.add_row("tokens", f"{sample.count('prompt')} prompt, {sample.count('trained')} trained, "
                            f"{sample.count('masked')} masked")
    table.add_row("truncated", fmt(sample.truncated))
    return table


def sample_text(sample: StepSample, decode) -> Text:  # noqa: ANN001 (ids -> str, or None)
    if decode is None:
        return Text("(no tokenizer on disk: token counts only)", style="dim")
    text = Text()
    for kind, ids in sample.segments:
        text.append(visible(decode(ids), multiline=True), style=SEGMENT_STYLES[kind])  # the model's words
    return text


class StepSamplesScreen(Screen):
    HELP_TITLE = "Training step samples"
    HELP_TEXT = HELP

    def __init__(self, run_dir: Path, step: int, stats: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.step = step
        self.stats = stats or {}  # the step's row of metrics.jsonl / stats.json
        self.samples = read_step_samples(self.run_dir, step)
        self.decode = None

    def compose(self) -> ComposeResult:
        yield Static(id="title", classes="title")
        with Horizontal():
            yield DataTable(id="samples", cursor_type="row")
            with VerticalScroll(id="sample-detail"):
                yield Static(id="sample-info")
                yield Static(id="sample-text")
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        rewards = [s.reward for s in self.samples if s.reward is not None]
        mean = sum(rewards) / len(rewards) if rewards else None
        title = Text.assemble((visible(f"step {self.step} · {self.run_dir.name}"), "bold"),
                              f"  {len(self.samples)} samples  reward mean {fmt(mean)}")
        if rate := step_error_rate(self.stats):
            kinds = visible(step_error_kinds(self.stats))
            title.append(f"  errors {rate_percent(rate)}" + (f" ({kinds})" if kinds else "") + ": not trained on", style="red")
        self.query_one("#title", Static).update(title)
        table = self.query_one("#samples", DataTable)
        table.add_columns("#", "reward", "adv", "example", "policy", "prompt", "trained", "masked", "trunc")
        for s in self.samples:
            table.add_row(str(s.index), Text(fmt(s.reward), style=reward_style(s.reward)), signed(s.advantage),
                          fmt(s.example_id), fmt(s.policy_step), str(s.count("prompt")), str(s.count("trained")),
                          str(s.count("masked")), "yes" if s.truncated else "")
        table.focus()
        if not self.samples:
            self.query_one("#status", Static).update("no batch.jsonl for this step yet")
            return
        self.show(0)
        self.load_tokenizer()

    @work(thread=True, exclusive=True)
    def load_tokenizer(self) -> None:
        decode = decoder_for(self.run_dir)
        self.app.call_from_thread(self._tokenizer_ready, decode)

    def _tokenizer_ready(self, decode) -> None:  # noqa: ANN001
        self.decode = decode
        self.show(self.query_one("#samples", DataTable).cursor_row)

    def show(self, position: int) -> None:
        if not self.samples:
            return
        sample = self.samples[min(max(position, 0), len(self.samples) - 1)]
        self.query_one("#sample-info", Static).update(Group(sample_details(sample), Text("")))
        self.query_one("#sample-text", Static).update(sample_text(sample, self.decode))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show(event.cursor_row)
