"""Sandboxes: where code a model wrote runs, never on the user's machine itself.

One small interface (`Sandbox.exec`, `read_file`, `write_file`, `close`) over providers chosen by
name: `bwrap` (the default on Linux), `podman`, `docker`, and `none` (unsandboxed, only when named).
Below the environment API in the layer order: it imports nothing else of prime.

    sandbox = await start_sandbox(SandboxSpec(memory_mb=512))
    result = await sandbox.exec("python3 -c 'print(2 + 2)'")
    await sandbox.close()
"""

from __future__ import annotations

from .base import LIVE, Sandbox, SandboxProvider, close_all
from .providers import NAMES, chosen_name, get_provider, provider_for, use_provider
from .spec import WORKDIR, ExecResult, SandboxError, SandboxSpec, SandboxUnavailable
from .stats import STATS, summary_line


async def start_sandbox(spec: SandboxSpec, provider: str | None = None) -> Sandbox:
    """Start a sandbox with the user's provider, else `provider` (the environment's wish), else bwrap."""
    return await provider_for(provider).start(spec)


__all__ = [
    "LIVE", "NAMES", "STATS", "WORKDIR", "ExecResult", "Sandbox", "SandboxError", "SandboxProvider", "SandboxSpec",
    "SandboxUnavailable", "chosen_name", "close_all", "get_provider", "provider_for", "start_sandbox",
    "summary_line", "use_provider",
]
