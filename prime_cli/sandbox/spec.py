"""What a sandbox is asked to be (`SandboxSpec`) and what one command in it returned (`ExecResult`).

Plain dataclasses, no imports beyond the standard library: environments build specs, providers read
them, and the eval runner only ever sees `ExecResult`s and `SandboxError`s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

WORKDIR = "/sandbox"  # the sandbox's private writable folder, and the default cwd of every command


class SandboxError(Exception):
    """A sandbox failed to start, died, or broke its protocol: an infrastructure error, never the
    model's fault. The rollout that hit it is errored (counted and shown), never scored 0."""


class SandboxUnavailable(SandboxError):
    """No provider can run here (bubblewrap or a container engine is missing). The message is one
    line naming what to install; the CLI shows it and exits 2 before any rollout starts."""


@dataclasses.dataclass(frozen=True)
class SandboxSpec:
    """One sandbox's shape. Every limit is enforced by the kernel (cgroups, a sized tmpfs, namespaces)
    or by the container engine; a limit a provider cannot enforce on this machine is listed in
    `Sandbox.unenforced`, never silently dropped."""

    image: str | None = None  # a container image (podman/docker) or an unpacked root filesystem folder (bwrap)
    cpus: float | None = 1.0
    memory_mb: int = 1024  # summed over every process in the sandbox
    pids: int = 64  # processes and threads in the sandbox
    disk_mb: int = 512  # the writable work folder and /tmp together
    timeout_s: float = 3600.0  # the sandbox's whole life; it is killed after that
    command_timeout_s: float = 60.0  # one exec() unless exec(timeout=) says otherwise
    network: bool = False
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    files: Mapping[str, bytes | str] = dataclasses.field(default_factory=dict)  # copied in at start (path -> content)
    start_command: str | None = None  # a shell command run once after the files are in
    max_output_bytes: int = 65536  # of stdout and of stderr, per exec(); the rest is counted and dropped
    python: bool = True  # bwrap without an image: make the running Python (and its packages) visible, read-only
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)  # e.g. the run id, for list/prune
    # containers: the image's own files writable (a task that edits /app, as Harbor tasks do); still no
    # capabilities, no new privileges, commands as uid 65534, the engine's limits. Not for bwrap
    writable_root: bool = False

    def describe(self) -> str:
        parts = [self.image or "host system files"]
        if self.cpus:
            parts.append(f"{self.cpus:g} CPU")
        parts += [f"{self.memory_mb} MiB", f"{self.pids} pids", f"{self.disk_mb} MiB disk",
                  "network" if self.network else "no network"]
        return ", ".join(parts)


@dataclasses.dataclass
class ExecResult:
    exit_code: int | None  # None when the command was killed at its timeout
    stdout: str
    stderr: str
    stdout_dropped: int = 0  # bytes past max_output_bytes, counted and not kept
    stderr_dropped: int = 0
    timed_out: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """stdout then stderr, as a terminal would show them to a model."""
        return self.stdout + (("\n" if self.stdout and not self.stdout.endswith("\n") else "") + self.stderr if self.stderr else "")
