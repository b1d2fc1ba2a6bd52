"""What a run prints while the embedded model's server is found or started (shared by every engine)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def local_server_status() -> Iterator[tuple[Callable[[str], None], Callable[[float], None]]]:
    """`(status, tick)` for `local_endpoint`: startup messages on stderr (a spinner on a terminal), so that
    stdout stays the run's own output."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    spinner = console.status("", spinner="dots") if console.is_terminal else None

    def status(message: str) -> None:  # each message ends the spinner; ticks restart it
        if spinner is not None:
            spinner.stop()
        console.print(f"[dim]local model: {message}[/dim]")

    def tick(elapsed: float) -> None:
        if spinner is not None:
            spinner.update(f"starting vLLM ({elapsed:.0f} s)")
            spinner.start()

    try:
        yield status, tick
    finally:
        if spinner is not None:
            spinner.stop()
