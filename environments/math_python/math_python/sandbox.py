"""The parent side of the math-python sandbox: one persistent interpreter per rollout.

`PythonSandbox.run(code)` sends code to a child interpreter (sandbox_worker.py) and waits for its
answer under a wall-clock deadline. The child runs in its own session and temporary directory with
a scrubbed environment (no API keys), kernel resource limits, a network namespace where available
and an audit hook; see the worker's docstring. Here:
- the output pipe is read while the code runs and only the first `max_output_bytes` are kept (the
  rest is counted and dropped), so printing 100 MB costs the host nothing;
- past the deadline the whole process group is killed with SIGKILL and the next call starts a
  fresh interpreter (its variables are gone, and the result says so);
- `close()` kills the group and deletes the directory; it is safe to call twice.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

WORKER = Path(__file__).with_name("sandbox_worker.py")
_LIVE: weakref.WeakSet[PythonSandbox] = weakref.WeakSet()  # killed at exit if nobody closed them


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    wall_seconds: float = 15.0  # one call, then the interpreter is killed
    cpu_seconds: int = 10  # one call, then the code gets CPUTimeExceeded (state kept)
    session_cpu_seconds: int = 120  # the interpreter's whole life (kernel limit)
    memory_mb: int = 1024  # address space
    max_output_bytes: int = 8192  # shown to the model per call
    max_file_mb: int = 16  # largest file it may write
    max_processes: int = 32  # RLIMIT_NPROC (binds non-root users; the audit hook binds everyone)
    max_open_files: int = 128


@dataclasses.dataclass
class SandboxResult:
    output: str
    error: str | None = None
    dropped_bytes: int = 0
    restarted: bool = False  # the interpreter died or was killed: its state is gone

    @property
    def ok(self) -> bool:
        return self.error is None and self.dropped_bytes == 0


def child_environment(root: str) -> dict[str, str]:
    """A minimal environment: nothing of the host's variables (keys, tokens) reaches the code."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": root, "TMPDIR": root, "LANG": "C.UTF-8"}
    env.update({name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    return env


class PythonSandbox:
    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.root: str | None = None
        self.network_namespace = False
        self._proc: subprocess.Popen | None = None
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------

    def _start(self) -> None:
        if self.root is None:
            self.root = tempfile.mkdtemp(prefix="prime-python-")
        request_r, request_w = os.pipe()
        response_r, response_w = os.pipe()
        config = {**dataclasses.asdict(self.limits), "root": self.root, "request_fd": request_r, "response_fd": response_w}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(WORKER), json.dumps(config)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(request_r, response_w), cwd=self.root, env=child_environment(self.root),
                start_new_session=True,
            )
        finally:
            os.close(request_r)
            os.close(response_w)
        assert self._proc.stdout is not None
        self._fds = {"request": request_w, "response": response_r, "output": self._proc.stdout.fileno()}
        os.set_blocking(request_w, False)
        _LIVE.add(self)
        ready = self._exchange(None, time.monotonic() + 30)
        if ready.error is not None:
            raise RuntimeError(f"the sandbox interpreter did not start: {ready.error} {ready.output}".strip())

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        for name, fd in self._fds.items():
            if name != "output":
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds = {}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._kill()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
                self.root = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- running code ----------------------------------------------------------------------------

    def run(self, code: str) -> SandboxResult:
        with self._lock:
            if self._closed:
                raise RuntimeError("this sandbox is closed")
            restarted = False
            if not self.alive:
                restarted = self._proc is not None  # it died since the last call
                self._kill()
                self._start()
            result = self._exchange(code, time.monotonic() + self.limits.wall_seconds)
            result.restarted = result.restarted or restarted
            return result

    def _exchange(self, code: str | None, deadline: float) -> SandboxResult:
        """Send one request (None: wait for the ready line) and collect output and the answer."""
        pending = b"" if code is None else (json.dumps({"code": code}) + "\n").encode()
        output, answer = bytearray(), bytearray()
        dropped = 0
        reading = {self._fds["output"], self._fds["response"]}
        while b"\n" not in answer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                return SandboxResult(
                    _text(output), f"TimeoutError: the code ran longer than {self.limits.wall_seconds:g} s and "
                    "was killed; the interpreter was restarted, so earlier variables are gone",
                    dropped, restarted=True)
            if self._fds["response"] not in reading:  # the child died before answering
                return self._died(output, dropped)
            poller = select.poll()  # poll, not select: fds above 1024 are fine (many rollouts at once)
            for fd in reading:
                poller.register(fd, select.POLLIN)
            if pending:
                poller.register(self._fds["request"], select.POLLOUT)
            events = dict(poller.poll(remaining * 1000))
            if events.get(self._fds["request"], 0) & (select.POLLOUT | select.POLLERR):
                try:
                    pending = pending[os.write(self._fds["request"], pending[:65536]):]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    pending = b""  # it died; the response pipe's end of file tells the rest
            for fd in reading & {fd for fd, flags in events.items() if flags & (select.POLLIN | select.POLLHUP)}:
                chunk = os.read(fd, 65536)
                if not chunk:
                    reading.discard(fd)
                elif fd == self._fds["response"]:
                    answer += chunk
                else:
                    dropped += self._keep(output, chunk)
        dropped += self._drain(output)
        reply = json.loads(answer.split(b"\n", 1)[0])
        if reply.get("ready"):
            self.network_namespace = bool(reply.get("network_namespace"))
            return SandboxResult("")
        return SandboxResult(_text(output), reply.get("error"), dropped + int(reply.get("dropped") or 0))

    def _keep(self, output: bytearray, chunk: bytes) -> int:
        room = max(self.limits.max_output_bytes - len(output), 0)
        output += chunk[:room]
        return len(chunk) - min(len(chunk), room)

    def _drain(self, output: bytearray) -> int:
        """Output already written before the answer: read what is there without waiting."""
        fd, dropped = self._fds["output"], 0
        os.set_blocking(fd, False)
        try:
            while chunk := os.read(fd, 65536):
                dropped += self._keep(output, chunk)
        except BlockingIOError:
            pass
        finally:
            os.set_blocking(fd, True)
        return dropped

    def _died(self, output: bytearray, dropped: int) -> SandboxResult:
        proc = self._proc
        code = proc.wait(timeout=10) if proc is not None else None
        self._kill()
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            why = {"SIGXCPU": "it used up the session's CPU time", "SIGKILL": "it was killed"}.get(name, name)
            reason = f"the interpreter stopped ({why}, {name})"
        else:
            reason = f"the interpreter exited (status {code})"
        return SandboxResult(_text(output), f"SandboxError: {reason}; it will be restarted and earlier variables are gone",
                             dropped, restarted=True)


@atexit.register
def _close_leftovers() -> None:
    for sandbox in list(_LIVE):
        sandbox.close()


def _text(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", "replace")
