"""Training run: the reward curve per step, a table of per-step stats, and (enter) a step's samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from prime_cli.records.training_run import (
    TrainingRun,
    rate_percent,
    read_training_run,
    step_error_kinds,
    step_error_rate,
    watch_key,
)
from prime_cli.runs.visible import visible
from prime_cli.tui.style import fmt, status_text

HELP = """A `prime train` output folder. The curve is the mean reward of each step's batch (one column
per step; many steps are averaged into a column). The table has one row per step: reward mean
and std, mismatch KL (k3 estimate of KL(inference||train)), the fraction of tokens the ratio band
masked, entropy, mean completion length, and seconds spent generating, training and waiting for
the batch; when rollouts errored, an errors column (the fraction of the step's sampled rollouts
whose reward function or environment raised, or that came back without tokens: not trained on) and
a card naming the kinds of the latest such steps (tracebacks: logs/orchestrator.log). With [orchestrator.eval], the eval card shows each eval environment's mean reward at the
evaluated steps (the eval runs themselves are in online_evals/step_N/<env>/: prime eval tui OUT/online_evals).
An SFT run (a data set or a teacher's rollouts) has no rewards: its curve is the loss per step and its table
shows loss, nll (mean per assistant token), entropy, tokens and grad norm. On-policy distillation adds a teacher kl
column (mean student minus teacher log-prob of the sampled tokens). Enter opens the selected step's samples.
A running run is followed as steps arrive."""

BLOCKS = " ▁▂▃▄▅▆▇█"
# (header, metrics.jsonl/stats.json key, digits)
COLUMNS: list[tuple[str, str, int]] = [
    ("step", "step", 0), ("reward", "reward_mean", 3), ("std", "reward_std", 3), ("kl", "mismatch_kl", 4),
    ("masked", "masked_fraction", 3), ("entropy", "entropy", 3), ("compl len", "completion_len_mean", 1),
    ("gen s", "generation_s", 1), ("train s", "train_s", 1), ("wait s", "wait_batch_s", 1),
]
# an SFT run (a data set or a teacher's rollouts): no rewards, the loss is the curve
SFT_COLUMNS: list[tuple[str, str, int]] = [
    ("step", "step", 0), ("loss", "loss", 4), ("nll", "nll", 4), ("entropy", "entropy", 3),
    ("tokens", "num_tokens", 0), ("grad norm", "grad_norm", 3), ("train s", "train_s", 1), ("wait s", "wait_batch_s", 1),
]
TEACHER_KL_COLUMN = ("teacher kl", "teacher_kl", 4)  # on-policy distillation: shown when the rows have it
ERRORS_COLUMN = ("errors", "error_rate", 0)  # shown once a step had errored rollouts
ERROR_STEPS_SHOWN = 5


def reward_curve(points: list[tuple[int, float]], width: int = 80, height: int = 6) -> Text:
    """A block chart of (step, reward): one column per step, or per bucket of steps when there are
    more steps than columns; the y axis runs from the lowest to the highest value."""
    if not points:
        return Text("no trained steps yet", style="dim")
    values = [v for _, v in points]
    per = max(1, -(-len(values) // width))
    columns = [sum(chunk) / len(chunk) for chunk in (values[i:i + per] for i in range(0, len(values), per))]
    low, high = min(columns), max(columns)
    span = high - low or 1.0
    levels = [round((v - low) / span * (height * 8 - 1)) + 1 for v in columns]  # 1..height*8
    text = Text()
    for row in range(height - 1, -1, -1):
        label = f"{high:7.3f} " if row == height - 1 else f"{low:7.3f} " if row == 0 else " " * 8
        text.append(label, style="dim")
        for level in levels:
            text.append(BLOCKS[min(max(level - row * 8, 0), 8)] * (1 if per > 1 or len(columns) > width // 2 else 2),
                        style="cyan")
        text.append("\n")
    first, last = points[0][0], points[-1][0]
    text.append(" " * 8 + f"step {first}" + (f" … {last}" if last != first else ""), style="dim")
    if per > 1:
        text.append(f"  ({per} steps per column)", style="dim")
    return text


def eval_lines(curves: dict[str, list[tuple[int, float]]]) -> Text:
    """Per eval environment: a sparkline over the evaluated steps, then `step: mean` for each."""
    text = Text()
    width = max((len(env) for env in curves), default=0)
    for env, points in curves.items():
        values = [v for _, v in points]
        low, span = min(values), (max(values) - min(values)) or 1.0
        text.append(visible(f"{env:<{width}}  "), style="bold")
        text.append("".join(BLOCKS[1 + round((v - low) / span * 7)] for v in values), style="magenta")
        text.append("  " + " · ".join(f"{step}: {value:.3f}" for step, value in points) + "\n")
    return text


def error_lines(run: TrainingRun) -> Text:
    """The latest steps with errored rollouts: `step 3  38% of 32 rollouts  reward:correct_answer 10, ...`."""
    text = Text()
    steps = [s for s in run.steps if step_error_rate(s)]
    for row in steps[-ERROR_STEPS_SHOWN:]:
        sampled = row.get("rollouts_sampled")
        text.append(f"step {row['step']}  ", style="bold")
        text.append(rate_percent(step_error_rate(row)) + (f" of {sampled} rollouts" if isinstance(sampled, int) else ""),
                    style="red")
        text.append(f"  {visible(step_error_kinds(row))}\n")
    text.append(f"{len(steps)} step{'' if len(steps) == 1 else 's'} with errors; errored rollouts are not "
                f"trained on; tracebacks in {visible(run.path.name)}/logs/orchestrator.log", style="dim")
    return text


def stat_cell(row: dict[str, Any], key: str, digits: int) -> str:
    value = row.get(key)
    if isinstance(value, float) and key in ("mismatch_kl", "teacher_kl"):
        return f"{value:.2e}"
    if key == ERRORS_COLUMN[1]:
        return rate_percent(step_error_rate(row)) if key in row else "–"
    return fmt(value, digits) if isinstance(value, (int, float)) else "–"


class TrainingScreen(Screen):
    HELP_TITLE = "Training run"
    HELP_TEXT = HELP
    BINDINGS = [Binding("enter", "open_step", "Samples")]

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.run: TrainingRun = read_training_run(self.run_dir)
        self._seen = watch_key(self.run_dir)

    def compose(self) -> ComposeResult:
        yield Static(id="title", classes="title")
        yield Static(id="curve", classes="card")
        yield Static(id="evals", classes="card")
        yield Static(id="errors", classes="card")
        yield DataTable(id="steps", cursor_type="row")
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#evals", Static).border_title = "online eval: mean reward at the evaluated steps"
        self.query_one("#errors", Static).border_title = "errored rollouts"
        self.columns: list[tuple[str, str, int]] = []
        self.fill()
        self.query_one("#steps", DataTable).focus()
        self.set_interval(self.app.live_interval, self.follow)

    def follow(self) -> None:
        key = watch_key(self.run_dir)
        if key != self._seen:
            self._seen = key
            self.run = read_training_run(self.run_dir)
            self.fill()

    def fill(self) -> None:
        run = self.run
        total = f"/{run.max_steps}" if run.max_steps is not None else ""
        what = f"SFT · {', '.join(run.data_sources or run.env_ids) or '?'}" if run.is_sft else \
            f"training · {', '.join(run.env_ids) or '?'}"
        self.query_one("#title", Static).update(Text.assemble(
            (visible(f"{what} · {run.model} · {self.run_dir.name}"), "bold"), "  ",
            status_text(run.status), f"  step {run.trained_steps}{total} trained"))
        title, points = run.curve()
        curve = self.query_one("#curve", Static)
        curve.border_title = title
        curve.update(reward_curve(points, width=max(20, self.size.width - 14)))
        curves = run.eval_curves()
        evals = self.query_one("#evals", Static)
        evals.display = bool(curves)
        evals.update(eval_lines(curves))
        errors = self.query_one("#errors", Static)
        errors.display = run.has_errors
        if run.has_errors:
            errors.update(error_lines(run))
        table = self.query_one("#steps", DataTable)
        cursor = table.cursor_row
        columns = list(SFT_COLUMNS if run.is_sft else COLUMNS)
        if any("teacher_kl" in row for row in run.steps):
            columns.insert(4, TEACHER_KL_COLUMN)
        if run.has_errors:
            columns.append(ERRORS_COLUMN)
        table.clear(columns=columns != self.columns)
        if columns != self.columns:  # the errors column appears once a step had errors
            self.columns = columns
            for header, key, _ in columns:
                table.add_column(header, key=key)
        for row in run.steps:
            table.add_row(*(stat_cell(row, key, digits) for _, key, digits in columns), key=str(row["step"]))
        if run.steps:
            table.move_cursor(row=min(cursor, len(run.steps) - 1))
        self.query_one("#status", Static).update(
            f"{len(run.steps)} steps sampled, {run.trained_steps} trained  ·  enter: the step's samples"
            if run.steps else "no steps yet (rollouts/step_N appear as the orchestrator writes them)")

    def action_open_step(self) -> None:
        table = self.query_one("#steps", DataTable)
        if not self.run.steps:
            return
        from prime_cli.tui.screens.training_step import StepSamplesScreen  # lazy: start-up

        row = self.run.steps[table.cursor_row]
        self.app.push_screen(StepSamplesScreen(self.run_dir, row["step"], row))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_step()
