"""What a run prints while the embedded model's server is found or started (shared by every engine)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from prime_cli.runs.wait_notices import notice_interval

# Without a terminal (a pipe, a log, CI) there is no spinner: a line says the start is still going this often.
WAIT_NOTICE_S = 30.0
WAIT_NOTICE_ENV = "PRIME_SERVE_WAIT_NOTICE_S"


@contextlib.contextmanager
def local_server_status() -> Iterator[tuple[Callable[[str], None], Callable[[float], None]]]:
    """`(status, tick)` for `local_endpoint`: startup messages on stderr (a spinner on a terminal), so that
    stdout stays the run's own output."""
    from rich.console import Console  # lazy: heavy

    console = Console(stderr=True, highlight=False)
    spinner = console.status("", spinner="dots") if console.is_terminal else None
    every = notice_interval(WAIT_NOTICE_ENV, WAIT_NOTICE_S)
    next_notice = [every]

    def status(message: str) -> None:  # each message ends the spinner; ticks restart it
        if spinner is not None:
            spinner.stop()
        console.print(f"[dim]local model: {message}[/dim]", soft_wrap=True)  # a pipe gets one line each

    def tick(elapsed: float) -> None:
        if spinner is not None:
            spinner.update(f"starting vLLM ({elapsed:.0f} s)")
            spinner.start()
        elif elapsed >= next_notice[0]:
            console.print(f"[dim]local model: vLLM is still starting ({elapsed:.0f} s so far)[/dim]")
            next_notice[0] = elapsed + every

    try:
        yield status, tick
    finally:
        if spinner is not None:
            spinner.stop()
