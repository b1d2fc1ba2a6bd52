"""The host side of agent.py: one long-lived process per sandbox, many requests in flight.

`AgentSandbox` starts a launcher argv (bwrap ... python agent.py, or python agent.py alone for
`none`), sends it a fresh key, waits for its ready line, then sends JSON requests and matches replies
by id. Only a line signed with the key is a reply (code in the sandbox can write to the pipe but not
sign; see agent.py); anything else is ignored, and an oversized line ends the sandbox with a
`SandboxError`, never a crash of the run.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import secrets
import signal
import time
from pathlib import Path

from .base import Sandbox
from .spec import ExecResult, SandboxError, SandboxSpec

AGENT_SOURCE = Path(__file__).with_name("agent.py")
READY_TIMEOUT_S = 30.0
MAX_LINE = 96 * 1024 * 1024  # a reply holds base64 of at most 64 MiB (a read) or 2 capped outputs
EXEC_GRACE_S = 5.0  # past a command's own timeout, how long to wait for the agent's reply


class AgentSandbox(Sandbox):
    def __init__(self, spec: SandboxSpec, sandbox_id: str | None = None) -> None:
        super().__init__(spec, sandbox_id)
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._reader: asyncio.Task | None = None
        self._lifetime: asyncio.TimerHandle | None = None
        self._broken: str | None = None
        self._key = secrets.token_bytes(32)
        self.agent_uid: int | None = None

    async def _launch(self, argv: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd, limit=MAX_LINE, start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(f"could not start the {self.provider} sandbox: {exc}") from None
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps({"key": self._key.hex()}) + "\n").encode())
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[0] = ready
        self._reader = asyncio.create_task(self._read_replies())
        try:
            hello = await asyncio.wait_for(ready, READY_TIMEOUT_S)
        except (TimeoutError, SandboxError) as exc:
            stderr = await self._stderr_tail()
            await self._close()
            why = str(exc) if isinstance(exc, SandboxError) else f"no ready line in {READY_TIMEOUT_S:g} s"
            raise SandboxError(f"the {self.provider} sandbox did not start ({why}){': ' + stderr if stderr else ''}") from None
        self.agent_uid = hello.get("uid")
        self._lifetime = asyncio.get_running_loop().call_later(self.spec.timeout_s, self._expire)

    def _expire(self) -> None:
        self._fail(f"the sandbox reached its lifetime limit of {self.spec.timeout_s:g} s and was killed")
        self._kill()

    async def _stderr_tail(self) -> str:
        if self._proc is None or self._proc.stderr is None:
            return ""
        with contextlib.suppress(Exception):
            data = await asyncio.wait_for(self._proc.stderr.read(4096), 1.0)
            return data.decode("utf-8", "replace").strip().splitlines()[-1] if data.strip() else ""
        return ""

    async def _read_replies(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while True:
                line = await self._proc.stdout.readline()
                if not line:
                    self._fail("the sandbox's agent exited (its processes were killed, or it ran out of memory)")
                    return
                mac, _, body = line.rstrip(b"\n").partition(b" ")
                if not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).hexdigest().encode()):
                    continue  # not signed by the agent: something else in the sandbox wrote it
                try:
                    message = json.loads(body)
                    future = self._pending.pop(int(message["id"]))
                except (ValueError, KeyError, TypeError):
                    continue  # not a reply to anything we asked: ignore it
                if not future.done():
                    future.set_result(message)
        except (ValueError, asyncio.LimitOverrunError):
            self._fail("the sandbox sent a reply longer than the protocol allows")
            self._kill()
        except asyncio.CancelledError:
            raise

    def _fail(self, why: str) -> None:
        self._broken = self._broken or why
        for future in self._pending.values():
            if not future.done():
                future.set_exception(SandboxError(why))
        self._pending.clear()

    async def _request(self, op: str, wait_s: float | None = None, **fields) -> dict:
        if self._broken:
            raise SandboxError(self._broken)
        assert self._proc is not None and self._proc.stdin is not None
        request_id = next(self._ids)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._proc.stdin.write((json.dumps({"id": request_id, "op": op, **fields}) + "\n").encode())
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            self._pending.pop(request_id, None)
            self._fail(f"the sandbox's agent is gone ({exc})")
            raise SandboxError(self._broken or "the sandbox's agent is gone") from None
        try:
            message = await asyncio.wait_for(future, wait_s)
        except TimeoutError:
            self._pending.pop(request_id, None)
            raise SandboxError(f"the sandbox did not answer a {op} request in {wait_s:g} s") from None
        if "error" in message:
            raise OSError(str(message["error"])[:500])
        return message

    async def _exec(self, argv, stdin, cwd, env, timeout) -> ExecResult:
        started = time.monotonic()
        message = await self._request(
            "exec", wait_s=timeout + EXEC_GRACE_S, argv=argv, input=base64.b64encode(stdin).decode(), cwd=cwd,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.workdir, "LANG": "C.UTF-8", **env},
            timeout=timeout, max_output=self.spec.max_output_bytes)
        try:
            return ExecResult(
                exit_code=None if message.get("exit_code") is None else int(message["exit_code"]),
                stdout=_text(message.get("stdout")), stderr=_text(message.get("stderr")),
                stdout_dropped=int(message.get("stdout_dropped") or 0), stderr_dropped=int(message.get("stderr_dropped") or 0),
                timed_out=bool(message.get("timed_out")), duration_s=time.monotonic() - started)
        except (TypeError, ValueError) as exc:
            raise SandboxError(f"the sandbox sent a malformed exec reply ({exc})") from None

    kill_scope = "all"  # kill(-1) inside the sandbox's pid namespace

    async def _stop_processes(self) -> None:
        await self._request("killall", wait_s=30.0, scope=self.kill_scope)

    async def _read(self, path: str) -> bytes:
        message = await self._request("read", wait_s=60.0, path=path)
        return base64.b64decode(message.get("data") or "")

    async def _write(self, path: str, data: bytes, mode: int) -> None:
        await self._request("write", wait_s=60.0, path=path, data=base64.b64encode(data).decode(), mode=mode)

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    async def _close(self) -> None:
        if self._lifetime is not None:
            self._lifetime.cancel()
        self._fail(f"sandbox {self.id} is closed")
        self._kill()
        if self._proc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 10)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        await self._release()

    async def _release(self) -> None:
        """What a provider made beside the process (a cgroup, a folder): removed after it is gone."""


def _text(value: object) -> str:
    return base64.b64decode(str(value or "")).decode("utf-8", "replace")
