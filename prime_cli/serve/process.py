"""A child process in its own process group, its output in a log file, that dies with its parent.

Used for the vLLM server and for the trainer plugin's parts: stopping one stops everything it
spawned (vLLM forks an engine core and workers), and a crash of ours never leaves orphans behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_GRACE_S = 15.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    os.setsid()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ManagedProcess:
    """One command started with `start(command, env)`; `stop()` ends its whole process group."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start_command(self, command: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                                            start_new_session=sys.platform != "linux")
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
