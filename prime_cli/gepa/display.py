"""How a GEPA run reports itself: a rich live panel on a terminal, plain lines otherwise."""

from __future__ import annotations

import os
import sys
import time
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported only when the live panel is used (--plain starts faster)
    from rich.console import Console
    from rich.panel import Panel


def _verdict(line: dict[str, Any]) -> str:
    if line["accepted"]:
        return f"accepted as candidate {line['child_idx']}"
    return f"rejected: {line['reason']}"


class GepaDisplay:
    """No-op base; use as a context manager."""

    def __enter__(self) -> GepaDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def start(self, **info: Any) -> None:
        pass

    def rollout_done(self) -> None:
        pass

    def update(self, **snapshot: Any) -> None:
        pass

    def message(self, text: str, level: str = "info") -> None:
        pass


class PlainDisplay(GepaDisplay):
    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout

    def _out(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, **info: Any) -> None:
        where = f" -> {info['run_dir']}" if info.get("run_dir") else ""
        resumed = f" (resuming at {info['used']} rollouts)" if info.get("used") else ""
        self._out(f"GEPA on {info['env_id']}: student {info['model']}, reflection {info['reflector']}, "
                  f"budget {info['max_calls']} rollouts{resumed}{where}")

    def update(self, **s: Any) -> None:
        line = s["line"]
        self._out(f"iteration {line['iteration']}: parent {line['parent_idx']} {_verdict(line)} | "
                  f"budget {s['used']}/{s['max_calls']} | best {s['best_score']:.4f} (candidate {s['best_idx']}, "
                  f"seed {s['seed_score']:.4f}) | {s['candidates']} candidate(s)")

    def message(self, text: str, level: str = "info") -> None:
        self._out(f"[{level}] {text}")


class RichDisplay(GepaDisplay):
    """Budget bar, iteration, best score, and the last proposal's verdict."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console()
        self.info: dict[str, Any] = {}
        self.snapshot: dict[str, Any] = {}
        self.rollouts = 0
        self.t0 = time.monotonic()
        self.live = Live(console=self.console, get_renderable=self._render, refresh_per_second=4, transient=False)

    def __enter__(self) -> RichDisplay:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live.is_started:
            self.live.stop()

    def start(self, **info: Any) -> None:
        self.info = info
        self.t0 = time.monotonic()

    def rollout_done(self) -> None:
        self.rollouts += 1

    def update(self, **snapshot: Any) -> None:
        self.snapshot = snapshot

    def message(self, text: str, level: str = "info") -> None:
        from rich.text import Text

        style = {"warning": "yellow", "error": "bold red"}.get(level, "dim")
        self.console.print(Text(text, style=style))

    def _render(self) -> Any:
        try:
            return self._panel()
        except Exception as exc:  # the refresh thread must never take the run down
            from rich.text import Text

            return Text(f"(display error: {exc!r})", style="red")

    def _panel(self) -> Panel:
        from rich.console import Group
        from rich.panel import Panel
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        info, s = self.info, self.snapshot
        if not info:
            return Panel(Text("Starting GEPA…", style="dim"), title="prime gepa", title_align="left")
        max_calls = info["max_calls"]
        used = s.get("used", info.get("used", 0))
        bar = Table.grid(padding=(0, 1))
        bar.add_row(Text("budget", style="dim"), ProgressBar(total=max(max_calls, 1), completed=min(used, max_calls), width=30),
                    Text(f"{used}/{max_calls} rollouts"), Text(f"({self.rollouts} run this session)", style="dim"),
                    Text(f"elapsed {time.monotonic() - self.t0:.0f}s", style="dim"))
        parts: list[Any] = [bar]
        if s:
            line = s["line"]
            parts.append(Text.assemble(("iteration ", "dim"), (str(line["iteration"]), "bold"),
                                       ("   candidates ", "dim"), (str(s["candidates"]), "bold"),
                                       ("   in flight ", "dim"), (str(s["in_flight"]), "bold")))
            parts.append(Text.assemble(("best ", "dim"), (f"{s['best_score']:.4f}", "bold green"),
                                       (f" (candidate {s['best_idx']})   seed ", "dim"), f"{s['seed_score']:.4f}"))
            style = "green" if line["accepted"] else "yellow"
            parts.append(Text.assemble(("last proposal ", "dim"), (f"#{line['iteration']} from {line['parent_idx']}: ", ""),
                                       (_verdict(line), style)))
        else:
            parts.append(Text("scoring the seed prompt on the validation rows…", style="dim"))
        title = Text(f"GEPA · {info['env_id']} · {info['model']} (reflection: {info['reflector']})")
        subtitle = Text(str(info["run_dir"])) if info.get("run_dir") else None
        return Panel(Group(*parts), title=title, title_align="left", subtitle=subtitle)


def make_display(mode: str = "auto", stream: IO[str] | None = None) -> GepaDisplay:
    if mode == "auto":
        is_tty = getattr(stream or sys.stdout, "isatty", lambda: False)()
        mode = "rich" if is_tty and os.environ.get("TERM") != "dumb" else "plain"
    if mode == "rich":
        from rich.console import Console

        return RichDisplay(Console(file=stream) if stream is not None else Console())
    return PlainDisplay(stream)
