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

Clock = Callable[[], float]
_STYLES = {"info": "dim", "warning": "yellow", "error": "bold red",  # message levels, then statuses
           "completed": "bold green", "cancelled": "bold yellow", "failed": "bold red"}


def _d(mapping: Any, key: str) -> dict:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, dict) else {}


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{digits}f}" if math.isfinite(x) else str(x)


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "-"


def _dur(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _counts(d: dict) -> str:
    return ", ".join(f"{k}: {_num(v)}" for k, v in sorted(d.items(), key=lambda kv: str(kv[0])))


def _mean_std(mean: Any, std: Any) -> str:
    return _num(mean) if std is None else f"{_num(mean)} ± {_num(std)}"


def _overview(s: dict) -> list[tuple[str, str, str]]:
    """(label, value, style) lines of the summary that are present in ``s``."""
    rows: list[tuple[str, str, str]] = []
    if s.get("num_rollouts") is not None:
        shape = f" ({_num(s.get('num_examples'))} examples x {_num(s.get('rollouts_per_example'))})"
        rows.append(("Rollouts", _num(s["num_rollouts"]) + shape, ""))
    if s.get("avg_reward") is not None:
        rows.append(("Reward", _mean_std(s["avg_reward"], s.get("std_reward")), "bold"))
    if pass_at_k := _d(s, "pass_at_k"):
        order = sorted(pass_at_k, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0, str(k)))
        rows.append(("pass@k", "  ".join(f"pass@{k}={_num(pass_at_k[k])}" for k in order), ""))
    if stops := _d(s, "stop_conditions"):
        rows.append(("Stop conditions", _counts(stops), ""))
    kinds = _d(s, "error_kinds")
    if s.get("avg_error") is not None or kinds:
        rows.append(("Errors", _pct(s.get("avg_error")) + (f" ({_counts(kinds)})" if kinds else ""),
                     "red" if s.get("avg_error") or any(kinds.values()) else "green"))
    if metric_errors := {k: v for k, v in _d(s, "metrics_errors").items() if v}:
        total = sum(v for v in metric_errors.values() if isinstance(v, (int, float)))
        rows.append(("Reward-fn errors", f"{_num(total)} failed calls ({_counts(metric_errors)})", "bold red"))
    if timing := _d(s, "timing"):
        parts = [f"{name} {_num(timing.get(key), 0)} ms" for name, key in (
            ("generation", "avg_generation_ms"), ("scoring", "avg_scoring_ms"), ("total", "avg_total_ms"),
            ("p50", "p50_total_ms"), ("p95", "p95_total_ms")) if timing.get(key) is not None]
        if parts:
            rows.append(("Timing", "  ".join(parts), ""))
    if usage := _d(s, "usage"):
        parts = [f"{kind} {_num(usage.get(f'{kind}_tokens'))} (avg {_num(usage.get(f'avg_{kind}_tokens'), 1)})"
                 for kind in ("prompt", "completion")
                 if usage.get(f"{kind}_tokens") is not None or usage.get(f"avg_{kind}_tokens") is not None]
        if parts:
            rows.append(("Tokens", "  ".join(parts), ""))
    if s.get("is_truncated") is not None:
        rows.append(("Truncated", _pct(s["is_truncated"]), "yellow" if s["is_truncated"] else ""))
    return rows


def _metric_table(s: dict) -> tuple[list[str], list[list[str]]]:
    means, stds = _d(s, "avg_metrics"), _d(s, "std_metrics")
    names = list(dict.fromkeys([*means, *stds]))
    return ["metric", "mean", "std"], [[str(n), _num(means.get(n)), _num(stds.get(n))] for n in names]


def _task_table(s: dict) -> tuple[list[str], list[list[str]]]:
    tasks = {str(k): v if isinstance(v, dict) else {} for k, v in _d(s, "per_task").items()}
    metrics = list(dict.fromkeys(m for t in tasks.values() for m in _d(t, "avg_metrics")))
    with_pass1 = any("1" in {str(k) for k in _d(t, "pass_at_k")} for t in tasks.values())
    headers = ["task", "rollouts", "reward", "errors", *(["pass@1"] if with_pass1 else []), *metrics]
    rows = []
    for name, t in tasks.items():
        pass1 = {str(k): v for k, v in _d(t, "pass_at_k").items()}.get("1")
        rows.append([name, _num(t.get("num_rollouts")), _mean_std(t.get("avg_reward"), t.get("std_reward")),
                     _pct(t.get("avg_error")), *([_num(pass1)] if with_pass1 else []),
                     *(_num(_d(t, "avg_metrics").get(m)) for m in metrics)])
    return headers, rows


def _text_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(c) for c in col) for col in zip(headers, *rows, strict=True)]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [headers, *rows]]


def summary_text(summary: dict) -> str:
    """The summary as plain text (no ANSI codes)."""
    s = summary if isinstance(summary, dict) else {}
    lines = [f"{label}: {value}" for label, value, _ in _overview(s)] or ["No results."]
    for title, (headers, rows) in (("Metrics", _metric_table(s)), ("Per task", _task_table(s))):
        if rows:
            lines += [f"{title}:", *_text_table(headers, rows)]
    return "\n".join(lines)


def render_summary(summary: dict, console: Console) -> None:
    """Print the summary: overview panel, metrics table and per-task table."""
    s = summary if isinstance(summary, dict) else {}
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan")
    grid.add_column()
    for label, value, style in _overview(s) or [("Results", "none", "dim")]:
        grid.add_row(label, Text(value, style=style))
    console.print(Panel(grid, title="Eval summary", title_align="left", expand=False))
    for title, (headers, rows) in (("Metrics", _metric_table(s)), ("Per task", _task_table(s))):
        if rows:
            table = Table(*headers, title=title, title_justify="left", header_style="bold")
            for row in rows:
                table.add_row(*(Text(c, justify="left" if i == 0 else "right") for i, c in enumerate(row)))
            console.print(table)


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

    def finish(self, *, status: str, summary: dict, run_dir: str | None,
               resume_command: str | None = None) -> None:
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
    """NDJSON events on ``stream`` (start, progress at most ~5/s, message, done) and nothing else.

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

    def finish(self, *, status: str, summary: dict, run_dir: str | None,
               resume_command: str | None = None) -> None:
        self._flush_pending()
        self._out(self._event("done", status=status, run_dir=run_dir, summary=summary,
                              resume_command=resume_command))


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
        metrics = "".join(f" {k}={_num(v)}" for k, v in _d(stats, "avg_metrics").items())
        merr = f" reward_fn_errors={stats['metrics_errors']}" if stats.get("metrics_errors") else ""
        self._progress_line(done, total, (
            f"{self.env_id} [{done}/{total} {_pct(done / total if total else 1.0)}] "
            f"{f'{rate:.2f}' if rate else '-'} rollouts/s elapsed {_dur(elapsed)} ETA {_dur(eta)} "
            f"avg_reward={_num(stats.get('avg_reward'))} errors={stats.get('errors', 0)}{merr}{metrics}"))

    def message(self, text: str, level: str = "info") -> None:
        self._out(f"{self.env_id} [{level}] {text}".lstrip())

    def finish(self, *, status: str, summary: dict, run_dir: str | None,
               resume_command: str | None = None) -> None:
        self._flush_pending()
        self._out(f"Eval {status}.\n{summary_text(summary)}")
        if run_dir:
            self._out(f"Results: {run_dir}")
        if resume_command:
            self._out(f"Resume with: {resume_command}")


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
                table.add_row(Text(str(name), style="dim"), Text(_num(value)))
            parts.append(table)
        info = self._info
        return Panel(Group(*parts), title=Text(f"{info.get('env_id')} · {info.get('model')}"),
                     title_align="left", subtitle=Text(str(info["run_dir"])) if info.get("run_dir") else None)

    def message(self, text: str, level: str = "info") -> None:
        self.console.print(Text(text, style=_STYLES.get(level, "")))

    def finish(self, *, status: str, summary: dict, run_dir: str | None,
               resume_command: str | None = None) -> None:
        self._stop()
        self.console.print(Text(f"Eval {status}", style=_STYLES.get(status, "bold")))
        render_summary(summary, self.console)
        if run_dir:
            self.console.print(Text.assemble(("Results: ", "bold"), str(run_dir)))
        if resume_command:  # soft_wrap: keep the command on one copy-pasteable line
            self.console.print(Text.assemble(("Resume with: ", "bold"), resume_command), soft_wrap=True)


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
