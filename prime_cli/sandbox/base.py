"""The one interface every sandbox provider implements, and the bookkeeping they share.

A `Sandbox` is started from a `SandboxSpec` by a `SandboxProvider` and offers `exec`, `read_file`,
`write_file` and `close`, all async so that hundreds run at once under the eval runner's concurrency.
Relative paths (and the default cwd) are inside `Sandbox.workdir`.

Every started sandbox is registered in `LIVE` until closed: `close_all()` runs at interpreter exit
and on the CLI's Ctrl-C path; what a SIGKILL leaves behind is found by `prime sandbox prune`
(bwrap dies with its parent by itself; containers carry labels naming the owning process).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import shlex
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence

from .spec import WORKDIR, ExecResult, SandboxError, SandboxSpec
from .stats import STATS

LABEL = "prime.sandbox"  # containers and cgroups prime made carry it, with the owner's pid
OWNER_LABEL = "prime.owner"

Command = str | Sequence[str]


def new_sandbox_id() -> str:
    return uuid.uuid4().hex[:12]


def as_argv(command: Command) -> list[str]:
    """A string is a shell command (`sh -c`), a sequence is an argv."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    argv = [str(part) for part in command]
    if not argv:
        raise ValueError("exec() needs a command")
    return argv


def as_bytes(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    return data.encode() if isinstance(data, str) else bytes(data)


def inside(workdir: str, path: str) -> str:
    return path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"


class Sandbox(abc.ABC):
    provider: str = ""
    workdir: str = WORKDIR

    def __init__(self, spec: SandboxSpec, sandbox_id: str | None = None) -> None:
        self.spec = spec
        self.id = sandbox_id or new_sandbox_id()
        self.unenforced: tuple[str, ...] = ()  # limits this provider could not enforce here
        self.closed = False
        self._closing: asyncio.Future | None = None
        self._deadline = time.monotonic() + spec.timeout_s

    @abc.abstractmethod
    async def _exec(self, argv: list[str], stdin: bytes, cwd: str, env: dict[str, str], timeout: float) -> ExecResult: ...

    @abc.abstractmethod
    async def _read(self, path: str) -> bytes: ...

    @abc.abstractmethod
    async def _write(self, path: str, data: bytes, mode: int) -> None: ...

    @abc.abstractmethod
    async def _close(self) -> None: ...

    async def exec(self, command: Command, input: bytes | str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None) -> ExecResult:
        """Run a command to its end (or its timeout) and return its exit code and capped output."""
        self._check_open()
        limit = self.spec.command_timeout_s if timeout is None else timeout
        limit = max(min(limit, self._deadline - time.monotonic()), 0.01)
        return await self._exec(as_argv(command), as_bytes(input), inside(self.workdir, cwd or "."),
                                {**self.spec.env, **(env or {})}, limit)

    async def read_file(self, path: str) -> bytes:
        self._check_open()
        return await self._read(inside(self.workdir, path))

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._check_open()
        await self._write(inside(self.workdir, path), as_bytes(data), mode)

    async def stop_processes(self) -> None:
        """Kill every process the sandbox's commands started, background ones too, and keep its files.
        A grader calls this before its own commands, so nothing the model left running can change the
        files under test or the grader's output."""
        self._check_open()
        await self._stop_processes()

    async def _stop_processes(self) -> None:
        # in a container, `kill -9 -1` from an exec'd process spares itself and pid 1 (the keep-alive sleep)
        await self.exec(["kill", "-9", "-1"], timeout=30)

    async def close(self) -> None:
        """Kill every process of the sandbox and remove what it made; safe to call twice, and from several
        tasks. The removal is shielded: a second Ctrl-C that cancels the rollout does not kill the engine's
        `rm` halfway (a container left "removing"); close_all() at the end of the run waits for it."""
        self.closed = True
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
            self._closing.add_done_callback(lambda _: LIVE.discard(self))
        await asyncio.shield(self._closing)

    async def _after_start(self) -> None:
        """Copy the spec's files in and run its start command (a failure there is a start failure)."""
        for path, content in self.spec.files.items():
            await self.write_file(path, content)
        if self.spec.start_command:
            result = await self.exec(self.spec.start_command)
            if not result.ok:
                raise SandboxError(f"the sandbox's start command failed (exit {result.exit_code}): "
                                   f"{(result.stderr or result.stdout).strip()[-300:]}")

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SandboxProvider(abc.ABC):
    name: str = ""
    isolated: bool = True  # False only for `none`

    @abc.abstractmethod
    def unavailable_reason(self) -> str | None:
        """None when this provider can start sandboxes here, else one line naming what to install."""

    @abc.abstractmethod
    async def _start(self, spec: SandboxSpec) -> Sandbox: ...

    async def start(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox (files copied in, start command run), timed and counted in `STATS`."""
        began = time.monotonic()
        try:
            sandbox = await self._start(spec)
            LIVE.add(sandbox)
            try:
                await sandbox._after_start()
            except BaseException:
                with contextlib.suppress(Exception):
                    await sandbox.close()
                raise
        except BaseException:
            STATS.failed(self.name)
            raise
        STATS.started(self.name, time.monotonic() - began)
        return sandbox


LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()


async def close_all() -> None:
    """Close every sandbox this process started and has not closed (Ctrl-C, the end of a run)."""
    sandboxes = list(LIVE)  # closing ones stay here until their removal is done
    if sandboxes:
        await asyncio.gather(*(sandbox.close() for sandbox in sandboxes), return_exceptions=True)


def owner_labels(spec: SandboxSpec) -> dict[str, str]:
    return {LABEL: "1", OWNER_LABEL: f"{os.uname().nodename}:{os.getpid()}", **spec.labels}


def shell_join(argv: Sequence[str]) -> str:
    return shlex.join(argv)
