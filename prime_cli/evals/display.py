"""How a running eval reports itself: a rich live panel, plain log lines or NDJSON events.

``done``/``total`` count every rollout of the run, including the ``already_done`` ones of a
resumed run; rate and ETA only count the rollouts finished by this process."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible

from .health import failed_before_any_rollout, health_rows, status_label
from .rollout_view import rollout_event, rollout_renderable, rollout_text, rollout_view
from .summary_view import _d, _dur, _num, _pct, render_summary, summary_text

__all__ = ["EvalDisplay", "JsonDisplay", "PlainDisplay", "RichDisplay", "make_display", "render_summary",
           "summary_text"]

Clock = Callable[[], float]
_STYLES = {"info": "dim", "warning": "yellow", "error": "bold red",  # message levels, then statuses
           RunStatus.COMPLETED: "bold green", RunStatus.CANCELLED: "bold yellow", RunStatus.FAILED: "bold red",
           RunStatus.COMPLETED_WITH_ERRORS: "bold red"}


class EvalDisplay:
    """Display protocol; every method is a no-op here.  Use as a context manager."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or time.monotonic
        self._t0: float | None = None
        self._already_done, self.env_id = 0, ""

    def __enter__(self) -> EvalDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, *, env_id: str, model: str, run_dir: str | None, total: int,
              already_done: int = 0, num_examples: int, rollouts_per_example: int) -> None:
        self._t0, self._already_done, self.env_id = self._clock(), already_done, env_id

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        pass

    def message(self, text: str, level: str = "info") -> None:
        pass

    def rollout(self, row: dict) -> None:
        """One finished rollout (a results.jsonl row), shown as it finishes (`-v`)."""

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        pass

    def _timing(self, done: int, total: int) -> tuple[float, float | None, float | None]:
        """(elapsed s, rollouts/s finished by this process, ETA s)."""
        now = self._clock()
        if self._t0 is None:
            self._t0 = now
        elapsed, new = now - self._t0, done - self._already_done
        rate = new / elapsed if elapsed > 0 and new > 0 else None
        eta = 0.0 if done >= total else (total - done) / rate if rate else None
        return elapsed, rate, eta


class _LineDisplay(EvalDisplay):
    """Writes whole lines to a stream; progress lines are throttled, the last one always shown."""

    min_interval, min_fraction = 2.0, 0.1

    def __init__(self, stream: IO[str] | None = None, *, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self.stream = stream or sys.stdout
        self._last: tuple[float, int] | None = None
        self._pending: str | None = None

    def _out(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def _progress_line(self, done: int, total: int, line: str) -> None:
        now, last = self._clock(), self._last
        step = max(1.0, self.min_fraction * total) if self.min_fraction else math.inf
        if last is None or done >= total or now - last[0] >= self.min_interval or done - last[1] >= step:
            self._last, self._pending = (now, done), None
            self._out(line)
        else:
            self._pending = line  # shown by finish() if no later update gets through

    def _flush_pending(self) -> None:
        if self._pending is not None:
            self._out(self._pending)
            self._pending = None


class JsonDisplay(_LineDisplay):
    """NDJSON events on ``stream`` (start, progress at most ~5/s, message, rollout with -v, done) and nothing else.

    Every event carries ``env_id``, so several runs can share one stream."""

    min_interval, min_fraction = 0.2, 0.0

    def _event(self, event: str, **fields: Any) -> str:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {str(k): clean(v) for k, v in x.items()}
            return [clean(v) for v in x] if isinstance(x, (list, tuple)) else x
        return json.dumps(clean({"event": event, "env_id": self.env_id, **fields}), default=str)

    def start(self, **kw: Any) -> None:
        super().start(**kw)
        self._out(self._event("start", **{"already_done": 0, **kw}))

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        elapsed, rate, eta = self._timing(done, total)
        keys = ("avg_reward", "avg_metrics", "errors", "metrics_errors")
        self._progress_line(done, total, self._event(
            "progress", done=done, total=total, rate=rate, eta_s=eta, elapsed_s=elapsed,
            **{k: stats.get(k) for k in keys}))

    def message(self, text: str, level: str = "info") -> None:
        self._out(self._event("message", level=level, text=text))

    def rollout(self, row: dict) -> None:
        self._out(self._event("rollout", **rollout_event(rollout_view(row, self.env_id))))

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        self._flush_pending()
        self._out(self._event("done", status=status, run_dir=run_dir, summary=summary,
                              resume_command=resume_command, retry_command=retry_command))


class PlainDisplay(_LineDisplay):
    """Plain text lines for logs and pipes: no ANSI codes, progress at most every 2 s or 10%."""

    def start(self, **kw: Any) -> None:
        super().start(**kw)
        resumed = f", resuming with {kw['already_done']} done" if kw.get("already_done") else ""
        where = f" -> {kw['run_dir']}" if kw.get("run_dir") else ""
        self._out(f"Evaluating {kw['model']} on {kw['env_id']}: {kw['num_examples']} examples x "
                  f"{kw['rollouts_per_example']} rollouts = {kw['total']} rollouts{resumed}{where}")

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        elapsed, rate, eta = self._timing(done, total)
        metrics = "".join(f" {visible(k)}={_num(v)}" for k, v in _d(stats, "avg_metrics").items())
        merr = f" reward_fn_errors={stats['metrics_errors']}" if stats.get("metrics_errors") else ""
        self._progress_line(done, total, (
            f"{self.env_id} [{done}/{total} {_pct(done / total if total else 1.0)}] "
            f"{f'{rate:.2f}' if rate else '-'} rollouts/s elapsed {_dur(elapsed)} ETA {_dur(eta)} "
            f"avg_reward={_num(stats.get('avg_reward'))} errors={stats.get('errors', 0)}{merr}{metrics}"))

    def message(self, text: str, level: str = "info") -> None:  # may quote a server's or an environment's words
        self._out(f"{self.env_id} [{level}] {visible(text, multiline=True)}".lstrip())

    def rollout(self, row: dict) -> None:
        self._out(f"{self.env_id} {rollout_text(rollout_view(row, self.env_id))}".lstrip())

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        self._flush_pending()
        if failed_before_any_rollout(status, summary):  # no empty summary: the error line says what failed
            for label, value, _ in health_rows(summary):
                self._out(f"{label}: {value}")
        else:
            self._out(f"Eval {status_label(status)}.\n{summary_text(summary)}")
            if run_dir:
                self._out(f"Results: {run_dir}")
        if resume_command:
            self._out(f"Resume with: {resume_command}")
        if retry_command:
            self._out(f"Retry errors with: {retry_command}")


class RichDisplay(EvalDisplay):
    """A live panel (progress bar, rate, ETA, running reward/metrics, errors) on a rich console."""

    def __init__(self, console: Console | None = None, *, clock: Clock | None = None,
                 refresh_per_second: float = 4) -> None:
        super().__init__(clock)
        self.console = console or Console()
        self._info: dict = {}
        self._done, self._total, self._stats = 0, 0, {}
        self._live = Live(console=self.console, get_renderable=self._render,
                          refresh_per_second=refresh_per_second, transient=False)

    def __enter__(self) -> RichDisplay:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        """Stop the live view (restoring the cursor and stdout/stderr); safe to call twice."""
        if self._live.is_started:
            self._live.stop()
            if not self.console.is_terminal:
                self.console.line()  # rich leaves a non-terminal's final frame unterminated

    def start(self, **kw: Any) -> None:
        super().start(**kw)
        self._info = kw
        self._done, self._total = kw.get("already_done", 0), kw["total"]

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        self._done, self._total, self._stats = done, total, stats

    def _render(self) -> Any:
        try:  # runs on rich's refresh thread: a bad value must not kill the view or the eval
            return self._panel()
        except Exception as exc:
            return Text(f"(progress display error: {exc!r})", style="red")

    def _panel(self) -> Panel:
        if not self._info:
            return Panel(Text("Starting eval…", style="dim"), title="prime eval", title_align="left")
        done, total, stats = self._done, self._total, self._stats
        elapsed, rate, eta = self._timing(done, total)
        row = Table.grid(padding=(0, 1))
        row.add_row(ProgressBar(total=max(total, 1), completed=done, width=30), Text(f"{done}/{total}"),
                    Text(f"{rate:.2f} rollouts/s" if rate else "- rollouts/s", style="cyan"),
                    Text(f"elapsed {_dur(elapsed)}"), Text(f"ETA {_dur(eta)}", style="magenta"))
        errors, merrs = stats.get("errors") or 0, stats.get("metrics_errors") or 0
        line = Text.assemble(("avg reward ", "dim"), (_num(stats.get("avg_reward")), "bold"),
                             ("   errors ", "dim"), (str(errors), "bold red" if errors else "green"))
        if merrs:
            line.append_text(Text.assemble(("   reward-fn errors ", "dim"), (str(merrs), "bold red")))
        parts: list[Any] = [row, line]
        if metrics := _d(stats, "avg_metrics"):
            table = Table.grid(padding=(0, 2))
            for name, value in list(metrics.items())[:12]:
                table.add_row(Text(visible(name), style="dim"), Text(_num(value)))
            parts.append(table)
        info = self._info
        return Panel(Group(*parts), title=Text(f"{info.get('env_id')} · {info.get('model')}"),
                     title_align="left", subtitle=Text(str(info["run_dir"])) if info.get("run_dir") else None)

    def message(self, text: str, level: str = "info") -> None:
        self.console.print(Text(visible(text, multiline=True), style=_STYLES.get(level, "")))

    def rollout(self, row: dict) -> None:  # printed above the live panel while it runs
        self.console.print(rollout_renderable(rollout_view(row, self.env_id)))

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        self._stop()
        if failed_before_any_rollout(status, summary):  # no empty summary: the error line says what failed
            for label, value, style in health_rows(summary):
                self.console.print(Text(f"{label}: {value}", style=style))
        else:
            self.console.print(Text(f"Eval {status_label(status)}", style=_STYLES.get(status, "bold")))
            render_summary(summary, self.console)
            if run_dir:
                self.console.print(Text.assemble(("Results: ", "bold"), str(run_dir)))
        # soft_wrap: keep each command on one copy-pasteable line
        for label, command in (("Resume with: ", resume_command), ("Retry errors with: ", retry_command)):
            if command:
                self.console.print(Text.assemble((label, "bold"), command), soft_wrap=True)


def make_display(mode: str | None = "auto", stream: IO[str] | None = None, *,
                 clock: Clock | None = None) -> EvalDisplay:
    """``auto`` (rich on a terminal, plain otherwise; also for None), ``rich``, ``plain``, ``json``."""
    mode = mode or "auto"
    if mode == "auto":
        is_tty = getattr(stream or sys.stdout, "isatty", lambda: False)()
        mode = "rich" if is_tty and os.environ.get("TERM") != "dumb" else "plain"
    if mode == "rich":
        return RichDisplay(Console(file=stream) if stream is not None else Console(), clock=clock)
    if mode in ("plain", "json"):
        return (PlainDisplay if mode == "plain" else JsonDisplay)(stream, clock=clock)
    raise ValueError(f"unknown display mode {mode!r} (choose auto, rich, plain or json)")
