"""Ctrl-C as every run takes it (an eval, a GEPA search). The first press drains: nothing new starts, what
is in flight finishes and is saved, and the run ends cancelled and resumable; the display says what it
waits for and that a second press stops now. The second press stops at once (what was in flight is not
saved; a resume runs it again)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable


class CtrlC:
    """The SIGINT handler of one run. `drain()` starts the drain and returns what it waits for ("3 in-flight
    group(s) to finish"); `stop_now()` is the second press; `say(text, level)` is the display's message."""

    def __init__(self, drain: Callable[[], str], stop_now: Callable[[], None],
                 say: Callable[[str, str], None]) -> None:
        self.drain, self.stop_now, self.say = drain, stop_now, say
        self.requested = False  # the first press came: the run ends cancelled
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self) -> None:
        if self.requested:
            self.stop_now()
            return
        self.requested = True
        self.say(f"cancelling: waiting for {self.drain()} (Ctrl-C again to stop now)", "warning")

    def install(self) -> None:
        """Take SIGINT on the running loop, where this is possible (the main thread, a platform with signals)."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self)
        except (NotImplementedError, RuntimeError):
            return
        self._loop = loop

    def remove(self) -> None:
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGINT)
            self._loop = None
