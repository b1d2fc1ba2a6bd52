"""A child process in its own process group, its output in a log file, that dies with its parent.

Used for the vLLM server and for the trainer plugin's parts: stopping one stops everything it
spawned (vLLM forks an engine core and workers), and a crash of ours never leaves orphans behind.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

STOP_GRACE_S = 15.0


PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up in the parent: loading a library between fork and exec can deadlock on a
    lock another thread held at the fork (`prime serve` runs a status thread)."""
    if sys.platform != "linux":
        return None
    try:
        import ctypes  # lazy: start-up

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(prctl: Callable[..., int], parent: int) -> Callable[[], None]:
    def in_the_child() -> None:  # pragma: no cover - runs in the child between fork and exec
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # only calls what the parent resolved
        if os.getppid() != parent:  # the parent died before the signal was asked for
            os._exit(1)

    return in_the_child


class ManagedProcess:
    """One command started with `start(command, env)`; `stop()` ends its whole process group."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start_command(self, command: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        prctl = _prctl()
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True,
                                            preexec_fn=_die_with_parent(prctl, os.getpid()) if prctl else None)
        finally:
            log.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def returncode(self) -> int | None:
        """None while running (or never started), else the exit code."""
        return self.process.poll() if self.process else None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join("  " + line for line in text[-lines:])

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the whole process group, then SIGKILL whatever is left after a grace period."""
        if self.process is None:
            return
        pgid = self.process.pid
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and group_alive(pgid):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=0.2)
            if not group_alive(pgid):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1.0)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
