"""How a running eval reports itself: a rich live panel, plain log lines or NDJSON events.

``done``/``total`` count every rollout of the run, including the ``already_done`` ones of a
resumed run; rate and ETA only count the rollouts finished by this process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from prime_cli.display import protocol as base
from prime_cli.display.protocol import STYLES, Clock
from prime_cli.results.cost import usd
from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible

from .health import failed_before_any_rollout, health_rows, status_label
from .rollout_view import rollout_event, rollout_renderable, rollout_text, rollout_view
from .summary_view import _d, _dur, _num, _pct, render_summary, summary_text

__all__ = ["EvalDisplay", "JsonDisplay", "PlainDisplay", "RichDisplay", "make_display", "render_summary",
           "summary_text"]


class EvalDisplay(base.Display):
    """The eval's display protocol (every method a no-op here): the shared one plus progress, rollouts and
    the end of the run. Use as a context manager."""

    env_id: str | None = ""
    _already_done = 0

    def start(self, *, env_id: str, model: str, run_dir: str | None, total: int,  # type: ignore[override]
              already_done: int = 0, num_examples: int, rollouts_per_example: int, **more: Any) -> None:
        """`more`: optional header fields, e.g. `limits` (a line saying the reply cap and timeout in use)."""
        super().start(env_id=env_id, model=model, run_dir=run_dir, total=total, already_done=already_done,
                      num_examples=num_examples, rollouts_per_example=rollouts_per_example, **more)
        self._already_done = already_done

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        pass

    def heartbeat(self, *, done: int, total: int, in_flight: list[tuple[Any, int]], oldest_s: float,
                  idle_s: float | None, timeout: float) -> None:
        """Nothing has finished for a while: `in_flight` (example id, rollouts) groups are waiting, the
        oldest sent `oldest_s` seconds ago; the last rollout finished `idle_s` seconds ago (None: none has yet)."""

    def rollout(self, row: dict) -> None:
        """One finished rollout (a results.jsonl row), shown as it finishes (`-v`)."""

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        pass

    def _timing(self, done: int, total: int) -> tuple[float, float | None, float | None]:
        """(elapsed s, rollouts/s finished by this process, ETA s)."""
        elapsed, new = self.elapsed(), done - self._already_done
        rate = new / elapsed if elapsed > 0 and new > 0 else None
        eta = 0.0 if done >= total else (total - done) / rate if rate else None
        return elapsed, rate, eta


class JsonDisplay(EvalDisplay, base.JsonLines):
    """NDJSON events on ``stream`` (start, progress at most ~5/s, message, rollout with -v, done) and nothing else.

    Every event carries ``env_id``, so several runs can share one stream."""

    def start(self, **kw: Any) -> None:
        super().start(**kw)
        self._out(self._event("start", **{"already_done": 0, **kw}))

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        elapsed, rate, eta = self._timing(done, total)
        keys = ("avg_reward", "avg_metrics", "errors", "metrics_errors", "cost_usd")
        self._progress_line(done, total, self._event(
            "progress", done=done, total=total, rate=rate, eta_s=eta, elapsed_s=elapsed,
            **{k: stats.get(k) for k in keys}))

    def rollout(self, row: dict) -> None:
        self._out(self._event("rollout", **rollout_event(rollout_view(row, self.env_id or ""))))

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        self._flush_pending()
        self._out(self._event("done", status=status, run_dir=run_dir, summary=summary,
                              resume_command=resume_command, retry_command=retry_command))


class PlainDisplay(EvalDisplay, base.PlainLines):
    """Plain text lines for logs and pipes: no ANSI codes, progress at most every 2 s or 10%."""

    def _tagged(self, line: str) -> str:
        return f"{self.env_id} {line}".lstrip()

    def header_lines(self, info: Mapping[str, Any]) -> list[str]:
        resumed = f", resuming with {info['already_done']} done" if info.get("already_done") else ""
        header = (f"Evaluating {info['model']} on {info['env_id']}: {info['num_examples']} examples x "
                  f"{info['rollouts_per_example']} rollouts = {info['total']} rollouts{resumed}{self.written_to(info)}")
        return [header, self._tagged(info["limits"])] if info.get("limits") else [header]

    def heartbeat(self, *, done: int, total: int, in_flight: list[tuple[Any, int]], oldest_s: float,
                  idle_s: float | None, timeout: float) -> None:
        self._flush_pending()
        self._out(heartbeat_text(self.env_id or "", done, total, in_flight, oldest_s, idle_s, timeout))

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        elapsed, rate, eta = self._timing(done, total)
        metrics = "".join(f" {visible(k)}={_num(v)}" for k, v in _d(stats, "avg_metrics").items())
        merr = f" reward_fn_errors={stats['metrics_errors']}" if stats.get("metrics_errors") else ""
        merr += f" spent={usd(stats['cost_usd'])}" if stats.get("cost_usd") is not None else ""
        self._progress_line(done, total, (
            f"{self.env_id} [{done}/{total} {_pct(done / total if total else 1.0)}] "
            f"{f'{rate:.2f}' if rate else '-'} rollouts/s elapsed {_dur(elapsed)} ETA {_dur(eta)} "
            f"avg_reward={_num(stats.get('avg_reward'))} errors={stats.get('errors', 0)}{merr}{metrics}"))

    def rollout(self, row: dict) -> None:
        self._out(self._tagged(rollout_text(rollout_view(row, self.env_id or ""))))

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


class RichDisplay(EvalDisplay, base.LivePanel):
    """A live panel (progress bar, rate, ETA, running reward/metrics, errors) on a rich console."""

    name = "eval"

    def __init__(self, console: Console | None = None, *, clock: Clock | None = None,
                 refresh_per_second: float = 4) -> None:
        super().__init__(console, clock=clock, refresh_per_second=refresh_per_second)
        self._done, self._total, self._stats = 0, 0, {}

    def start(self, **kw: Any) -> None:
        super().start(**kw)
        self._done, self._total = kw.get("already_done", 0), kw["total"]
        if kw.get("limits"):
            self.console.print(Text(kw["limits"], style="dim"))

    def progress(self, *, done: int, total: int, stats: dict) -> None:
        self._done, self._total, self._stats = done, total, stats

    def _running_panel(self) -> Panel:
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
        if stats.get("cost_usd") is not None:
            line.append_text(Text.assemble(("   spent ", "dim"), (usd(stats["cost_usd"]), "bold")))
        parts: list[Any] = [row, line]
        if metrics := _d(stats, "avg_metrics"):
            table = Table.grid(padding=(0, 2))
            for name, value in list(metrics.items())[:12]:
                table.add_row(Text(visible(name), style="dim"), Text(_num(value)))
            parts.append(table)
        info = self.info
        return Panel(Group(*parts), title=Text(f"{info.get('env_id')} · {info.get('model')}"),
                     title_align="left", subtitle=Text(str(info["run_dir"])) if info.get("run_dir") else None)

    def rollout(self, row: dict) -> None:  # printed above the live panel while it runs
        self.console.print(rollout_renderable(rollout_view(row, self.env_id)))

    def finish(self, *, status: RunStatus, summary: dict, run_dir: str | None,
               resume_command: str | None = None, retry_command: str | None = None) -> None:
        self._stop()
        if failed_before_any_rollout(status, summary):  # no empty summary: the error line says what failed
            for label, value, style in health_rows(summary):
                self.console.print(Text(f"{label}: {value}", style=style))
        else:
            self.console.print(Text(f"Eval {status_label(status)}", style=STYLES.get(status, "bold")))
            render_summary(summary, self.console)
            if run_dir:
                self.console.print(Text.assemble(("Results: ", "bold"), str(run_dir)))
        # soft_wrap: keep each command on one copy-pasteable line
        for label, command in (("Resume with: ", resume_command), ("Retry errors with: ", retry_command)):
            if command:
                self.console.print(Text.assemble((label, "bold"), command), soft_wrap=True)


def heartbeat_text(env_id: str, done: int, total: int, in_flight: list[tuple[Any, int]], oldest_s: float,
                   idle_s: float | None, timeout: float) -> str:
    """`reverse-text [0/24 0.0%] waiting: 24 rollouts in flight (examples 0, 1, 2), the oldest since
    14:02:11 (1:05 ago); none finished yet; a model call times out after 300s (--timeout)`."""
    from datetime import datetime, timedelta  # lazy: already loaded

    rollouts = sum(count for _, count in in_flight)
    ids = [visible(str(example_id)) for example_id, _ in in_flight]
    shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
    since = (datetime.now() - timedelta(seconds=oldest_s)).strftime("%H:%M:%S")
    last = "none finished yet" if idle_s is None else f"the last finished {_dur(idle_s)} ago"
    return (f"{env_id} [{done}/{total} {_pct(done / total if total else 1.0)}] waiting: {rollouts} rollout"
            f"{'s' * (rollouts != 1)} in flight ({'example' if len(ids) == 1 else 'examples'} {shown}), the oldest "
            f"since {since} ({_dur(oldest_s)} ago); {last}; a model call times out after {timeout:g}s (--timeout)"
            ).lstrip()


def make_display(mode: str | None = "auto", stream: IO[str] | None = None, *,
                 clock: Clock | None = None) -> EvalDisplay:
    """``auto`` (rich on a terminal, plain otherwise; also for None), ``rich``, ``plain``, ``json``."""
    kinds = {"rich": RichDisplay, "plain": PlainDisplay, "json": JsonDisplay}
    return base.make_display(mode, stream, kinds, clock=clock)  # type: ignore[return-value]
