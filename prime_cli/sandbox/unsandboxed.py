"""The `none` provider: the same agent as bwrap's, run as a plain child in a temporary folder.

No isolation at all: only when a user names it (`--sandbox none`), and every summary and metadata
file of the run says "unsandboxed". It exists for machines where nothing else runs and for
debugging an environment; it is never chosen silently.
"""

from __future__ import annotations

import shutil
import sys
import tempfile

from .agent_channel import AGENT_SOURCE, AgentSandbox
from .base import SandboxProvider
from .spec import SandboxError, SandboxSpec


class UnsandboxedSandbox(AgentSandbox):
    provider = "none"
    kill_scope = "started"  # the process groups of its own commands; a daemon that left its group is not found

    async def start(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix=f"prime-unsandboxed-{self.id}-")
        self.unenforced = ("cpus", "memory", "pids", "disk", "network", "filesystem")
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.workdir, "LANG": "C.UTF-8"}
        await self._launch([sys.executable, "-I", "-S", str(AGENT_SOURCE)], env=env, cwd=self.workdir)

    async def _close(self) -> None:
        # no pid namespace here: what the commands left running (a daemonized REPL) is killed first
        if self._proc is not None and self._proc.returncode is None and not self._broken:
            try:
                await self._request("killall", wait_s=10.0, scope=self.kill_scope)
            except (OSError, SandboxError):
                pass
        await super()._close()

    async def _release(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


class UnsandboxedProvider(SandboxProvider):
    name = "none"
    isolated = False

    def unavailable_reason(self) -> str | None:
        return None

    async def _start(self, spec: SandboxSpec) -> UnsandboxedSandbox:
        sandbox = UnsandboxedSandbox(spec)
        try:
            await sandbox.start()
        except BaseException:
            await sandbox.close()
            raise
        return sandbox
