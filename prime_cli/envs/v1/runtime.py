"""`Runtime` of verifiers' v1 API: where a task's programs run (its `setup`, or a reward that reads files or
runs a script), as one of prime's sandboxes.

A task that asks for a runtime (a `setup`, `finalize`, reward or metric with a `runtime` parameter, a
container `image`, or `NEEDS_CONTAINER`) gets a `SandboxRuntime` per rollout: a bwrap sandbox, or a
podman/docker container when the task names an image (sandbox/providers.py picks the engine the user
runs). It starts on first use and is closed once the rollout is scored. `TaskData.resources` (cpu,
memory, disk) and `timeout.agent` size it; the network stays off (prime's sandboxes have none unless an
environment asks, and v1's default `network_allow = ["*"]` is no request).

`prepare_uv_script` / `run_uv_script` (PEP 723 scripts such as gsm8k's verifier) run the script with the
sandbox's Python: prime's own under bwrap (read-only, with its packages), the image's `python3` in a
container. Nothing is downloaded, so each dependency the script declares must be installed in prime's
environment (checked there, for either); a missing one is one line naming it and the fix.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from typing import Any

from prime_cli.sandbox import Sandbox, SandboxSpec, start_sandbox

SCRIPT_BLOCK = re.compile(r"^# /// script\s*$(.*?)^# ///\s*$", re.M | re.S)
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class ProgramResult:
    exit_code: int
    stdout: str
    stderr: str


class Runtime:
    """The interface tasksets call (verifiers' `vf.Runtime`); `SandboxRuntime` is prime's."""

    async def run(self, argv: list[str], env: dict[str, str] | None = None) -> ProgramResult:
        raise NotImplementedError

    async def read(self, path: str, max_bytes: int | None = None) -> bytes:
        raise NotImplementedError

    async def write(self, path: str, data: bytes) -> None:
        raise NotImplementedError


def script_dependencies(script: str) -> list[str]:
    """The distribution names a PEP 723 script's `# /// script` block lists."""
    match = SCRIPT_BLOCK.search(script)
    if match is None:
        return []
    body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in match.group(1).splitlines())
    names = []
    for requirement in tomllib.loads(body).get("dependencies", []):
        if found := REQUIREMENT_NAME.match(str(requirement)):
            names.append(found.group(1))
    return names


def missing_distributions(names: list[str]) -> list[str]:
    missing = []
    for name in names:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


_ROLLOUT_RUNTIME: contextvars.ContextVar[SandboxRuntime | None] = contextvars.ContextVar("prime_v1_runtime", default=None)


def use_runtime(runtime: SandboxRuntime | None) -> None:
    """The runtime the running rollout's tools act in (set in its own asyncio task: concurrent rollouts each
    see their own)."""
    _ROLLOUT_RUNTIME.set(runtime)


def rollout_runtime() -> SandboxRuntime | None:
    return _ROLLOUT_RUNTIME.get()


class SandboxRuntime(Runtime):
    def __init__(self, spec: SandboxSpec, provider: str | None = None, cwd: str | None = None) -> None:
        self.spec, self.provider, self.cwd = spec, provider, cwd
        self._sandbox: Sandbox | None = None
        self._starting = asyncio.Lock()

    async def sandbox(self) -> Sandbox:
        async with self._starting:
            if self._sandbox is None:
                self._sandbox = await start_sandbox(self.spec, self.provider)
        return self._sandbox

    async def run(self, argv: list[str], env: dict[str, str] | None = None) -> ProgramResult:
        result = await (await self.sandbox()).exec(list(argv), env=env or {}, cwd=self.cwd)
        code = result.exit_code if result.exit_code is not None else 124  # killed at its timeout
        return ProgramResult(code, result.stdout, result.stderr + ("\n(timed out)" if result.timed_out else ""))

    async def read(self, path: str, max_bytes: int | None = None) -> bytes:
        data = await (await self.sandbox()).read_file(path)
        if max_bytes is not None and len(data) > max_bytes:
            raise ValueError(f"{path} is {len(data)} bytes, over the {max_bytes} asked for")
        return data

    async def write(self, path: str, data: bytes | str) -> None:
        await (await self.sandbox()).write_file(path, data)

    async def prepare_uv_script(self, script: str | bytes, env: dict[str, str] | None = None, *,
                                activate: bool = True) -> list[str]:
        text = script.decode() if isinstance(script, bytes) else script
        if missing := missing_distributions(script_dependencies(text)):
            raise RuntimeError(f"the task's script needs {', '.join(missing)}, which prime's Python lacks (prime runs "
                               f"a task's uv script with its own Python and downloads nothing): pip install "
                               f"{' '.join(missing)}")
        path = f"uv-script-{hashlib.sha256(text.encode()).hexdigest()[:16]}.py"  # in the sandbox's work folder
        await self.write(path, text)
        return [await self.python(), path]

    async def python(self) -> str:
        """bwrap without an image shows prime's own Python (read-only, with its packages); a container its own."""
        sandbox = await self.sandbox()
        return sys.executable if sandbox.provider in ("bwrap", "none") and not self.spec.image else "python3"

    async def run_uv_script(self, script: str | bytes, args: list[str] | None = None,
                            env: dict[str, str] | None = None) -> ProgramResult:
        argv = await self.prepare_uv_script(script, env)
        return await self.run([*argv, *(args or [])], env)

    async def close(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()


def spec_for(data: Any) -> SandboxSpec:
    """The sandbox of one task: its image (a container) or none (bwrap), its resources and agent timeout."""
    resources, timeout = data.resources, data.timeout
    fields: dict[str, Any] = {"image": data.image, "writable_root": bool(data.image)}  # a task edits its image's files
    if resources.cpu:
        fields["cpus"] = float(resources.cpu)
    if resources.memory:
        fields["memory_mb"] = int(resources.memory * 1024)
    if resources.disk:
        fields["disk_mb"] = int(resources.disk * 1024)
    if timeout.agent:
        fields["command_timeout_s"] = float(timeout.agent)
    return SandboxSpec(**fields)
