"""How `prime train` stops on a signal: Ctrl-C (SIGINT), SIGTERM and SIGHUP (its terminal closed) each stop
every part, print the line and the resume command, and exit 128 + the signal's number (130, 143, 129)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP (the terminal closed)"}


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, caught where Ctrl-C is."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def exit_code(stop: KeyboardInterrupt) -> int:
    return 128 + int(getattr(stop, "signum", signal.SIGINT))


def stop_name(stop: KeyboardInterrupt) -> str:
    return NAMES.get(getattr(stop, "signum", signal.SIGINT), "a signal")


def _leave_closed_terminal() -> None:
    """After a hangup every write to the terminal fails (EIO): output goes nowhere instead, so the stop
    still runs to its end (the parts stopped, the exit code). Where stderr is a file or a pipe (nohup,
    `2> log`), it is kept and gets the line."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Stopped (a KeyboardInterrupt) while inside (an ignored one stays ignored); the
    previous handlers after."""
    stderr_was_terminal = os.isatty(2)

    def handler(signum, frame):  # noqa: ARG001
        if signum == signal.SIGHUP and stderr_was_terminal and not os.isatty(2):  # a hung-up terminal says no
            _leave_closed_terminal()
        raise Stopped(signum)

    # an ignored SIGHUP stays ignored: `nohup prime train ...` is meant to outlive its terminal
    caught = [sig for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, handler) for sig in caught}
    try:
        yield
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)
