"""How a running engine (an eval, a GEPA search) reports itself: the display protocol and its three kinds.

`Display` is the protocol: a context manager with `start(**info)` and `message(text, level)`, and a
clock. Its kinds: `PlainLines` (text lines for logs and pipes), `JsonLines` (NDJSON events for
`--json`) and `LivePanel` (a rich live panel on a terminal). Each engine adds its own events (an
eval's progress and rollouts, GEPA's iterations) in thin subclasses of these. Every text from a
model, an environment or a data set is shown through `visible`. rich is imported only when a live
panel is made, so that the plain and JSON kinds start fast.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.panel import Panel

Clock = Callable[[], float]
STYLES = {"info": "dim", "warning": "yellow", "error": "bold red",  # message levels, then run statuses
          RunStatus.COMPLETED: "bold green", RunStatus.CANCELLED: "bold yellow", RunStatus.FAILED: "bold red",
          RunStatus.COMPLETED_WITH_ERRORS: "bold red"}


class Display:
    """The protocol; every report is a no-op here. Use as a context manager."""

    env_id: str | None = None  # what JSON events carry before start() names the run

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or time.monotonic
        self.t0: float | None = None
        self.info: dict[str, Any] = {}

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, **info: Any) -> None:
        self.info, self.t0, self.env_id = info, self.clock(), info.get("env_id")

    def message(self, text: str, level: str = "info") -> None:
        pass

    def elapsed(self) -> float:
        """Seconds since start() (since the first call, when start() was never called)."""
        now = self.clock()
        if self.t0 is None:
            self.t0 = now
        return now - self.t0


class LineDisplay(Display):
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
        """Shown when it is the first, the last (done == total), `min_interval` seconds after the last one
        shown, or `min_fraction` of the total further on; else kept for `_flush_pending`."""
        now, last = self.clock(), self._last
        step = max(1.0, self.min_fraction * total) if self.min_fraction else math.inf
        if last is None or done >= total or now - last[0] >= self.min_interval or done - last[1] >= step:
            self._last, self._pending = (now, done), None
            self._out(line)
        else:
            self._pending = line

    def _flush_pending(self) -> None:
        if self._pending is not None:
            self._out(self._pending)
            self._pending = None


class PlainLines(LineDisplay):
    """Plain text lines for logs and pipes: no ANSI codes. A run starts with its `header_lines`."""

    def start(self, **info: Any) -> None:
        super().start(**info)
        for line in self.header_lines(info):
            self._out(line)

    def header_lines(self, info: Mapping[str, Any]) -> list[str]:
        """What runs (ending with `written_to`), then what an engine adds; none here."""
        return []

    @staticmethod
    def written_to(info: Mapping[str, Any]) -> str:
        """` -> RUN_DIR` when the run writes a folder, else nothing."""
        return f" -> {info['run_dir']}" if info.get("run_dir") else ""

    def _tagged(self, line: str) -> str:
        """A line as shown: an engine may name its run in front (several runs can share a stream)."""
        return line

    def message(self, text: str, level: str = "info") -> None:  # may quote a server's or an environment's words
        self._out(self._tagged(f"[{level}] {visible(text, multiline=True)}"))


class JsonLines(LineDisplay):
    """NDJSON events, one a line, each with its `event` and the run's `env_id`; nothing else on the stream.
    Non-finite floats become null, so that every line is strict JSON."""

    min_interval, min_fraction = 0.2, 0.0

    def _event(self, event: str, **fields: Any) -> str:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {str(k): clean(v) for k, v in x.items()}
            return [clean(v) for v in x] if isinstance(x, (list, tuple)) else x
        return json.dumps(clean({"event": event, "env_id": self.env_id, **fields}), default=str)

    def message(self, text: str, level: str = "info") -> None:
        self._out(self._event("message", level=level, text=text))


class LivePanel(Display):
    """A rich live panel, redrawn a few times a second while the run goes on; messages print above it.
    Subclasses draw it (`_running_panel`) once start() has been called."""

    name = "run"  # in the panel shown before start(): "Starting <name>…", titled "prime <name>"

    def __init__(self, console: Console | None = None, *, clock: Clock | None = None,
                 refresh_per_second: float = 4) -> None:
        from rich.console import Console  # lazy: heavy
        from rich.live import Live  # lazy: heavy

        super().__init__(clock)
        self.console = console or Console()
        self._live = Live(console=self.console, get_renderable=self._render,
                          refresh_per_second=refresh_per_second, transient=False)

    def __enter__(self) -> LivePanel:
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

    def message(self, text: str, level: str = "info") -> None:
        from rich.text import Text  # lazy: heavy

        self.console.print(Text(visible(text, multiline=True), style=STYLES.get(level, "")))

    def _render(self) -> Any:
        try:  # runs on rich's refresh thread: a bad value must not kill the view or the run
            return self._panel()
        except Exception as exc:
            from rich.text import Text  # lazy: heavy

            return Text(f"(progress display error: {exc!r})", style="red")

    def _panel(self) -> Panel:
        if self.info:
            return self._running_panel()
        from rich.panel import Panel  # lazy: heavy
        from rich.text import Text  # lazy: heavy

        return Panel(Text(f"Starting {self.name}…", style="dim"), title=f"prime {self.name.lower()}",
                     title_align="left")

    def _running_panel(self) -> Panel:
        raise NotImplementedError


def make_display(mode: str | None, stream: IO[str] | None, kinds: Mapping[str, Callable[..., Display]], *,
                 clock: Clock | None = None) -> Display:
    """The display of `kinds` ("rich", "plain", "json") that `mode` asks for on `stream` (None: stdout):
    ``auto`` (also for None) is rich on a terminal, plain otherwise."""
    mode = mode or "auto"
    if mode == "auto":
        is_tty = getattr(stream or sys.stdout, "isatty", lambda: False)()
        mode = "rich" if is_tty and os.environ.get("TERM") != "dumb" else "plain"
    if mode == "rich":
        from rich.console import Console  # lazy: heavy

        return kinds["rich"](Console(file=stream) if stream is not None else Console(), clock=clock)
    if mode in ("plain", "json"):
        return kinds[mode](stream, clock=clock)
    raise ValueError(f"unknown display mode {mode!r} (choose auto, rich, plain or json)")
