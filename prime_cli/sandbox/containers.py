"""The `podman` and `docker` providers: one container per sandbox, driven through the engine's own CLI.

The CLI honours the user's `CONTAINER_HOST` / `DOCKER_HOST` (and contexts), so the same code runs
sandboxes on a remote engine; nothing here clears them. A container is started once
(`run -d ... sleep LIFETIME`: the container stops by itself when the sandbox's life is over, even if
prime was SIGKILLed) and every command is a `exec -i`:

- limits are the engine's: `--memory`/`--memory-swap` (no swap), `--pids-limit`, `--cpus`,
  `--network none` unless asked, `--cap-drop ALL`, `no-new-privileges`, a read-only root with sized
  tmpfs for /sandbox and /tmp and a sized /dev/shm (the disk limit split between them; `exec` is given
  explicitly since both engines mount a tmpfs noexec by default; podman's own unsized /var/tmp and /run
  are turned off);
- every command runs as uid/gid 65534; pid 1 (the init and the lifetime sleep) stays uid 0 without
  capabilities, so a process the model left behind can neither ptrace nor signal it;
- `--init` (catatonit / docker-init) is PID 1 and reaps what a timeout killed, else zombies would
  count against the pids limit;
- no `-w` at `run`: docker makes the work folder in the image and the tmpfs then loses its mode, so the
  folder is given to every `exec` instead;
- `spec.env` is not given to `run` (the engine would keep it in the container's config, on disk):
  each `exec` carries it, by name only (`-e PRIME_SBX_E0`, the value in the CLI's own environment,
  never in argv), renamed inside by a `/bin/sh` prelude, so a variable such as PATH or HOME never
  changes what the engine's CLI itself does;
- each command runs under `timeout -s KILL` inside the container, so it dies on time even if the exec
  client is killed; a host-side bound covers an engine that stops answering;
- labels from `owner_labels` (host and pid of the owner) let `prime sandbox prune` find what a dead
  prime left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import time

from .base import Sandbox, SandboxProvider, owner_labels
from .images import BASE_IMAGE
from .spec import WORKDIR, ExecResult, SandboxError, SandboxSpec, SandboxUnavailable

START_TIMEOUT_S = 120.0
HOST_GRACE_S = 10.0  # beyond the in-container timeout, before the host gives up on the exec client
MAX_READ_BYTES = 64 * 1024 * 1024
READ_CHUNK = 65536
NAME_PREFIX = "prime-sbx-"
DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": WORKDIR, "LANG": "C.UTF-8"}
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
USER = ("--user", "65534:65534")  # every command; pid 1 (init and its sleep) is uid 0 so they cannot ptrace it
KILLED_BY_TIMEOUT = 137  # `timeout -s KILL` kills its own process group, itself included: 128 + 9


async def read_capped(stream: asyncio.StreamReader | None, limit: int) -> tuple[bytes, int]:
    """Read a pipe to its end keeping the first `limit` bytes; returns (kept, dropped count)."""
    kept, dropped = bytearray(), 0
    if stream is None:
        return b"", 0
    while chunk := await stream.read(READ_CHUNK):
        room = max(limit - len(kept), 0)
        kept += chunk[:room]
        dropped += len(chunk) - min(len(chunk), room)
    return bytes(kept), dropped


async def feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    if stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            stdin.write(data)
            await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        stdin.close()


def last_line(data: bytes) -> str:
    """The engine's last meaningful stderr line (docker ends with "Run 'docker run --help' ...")."""
    lines = [line for line in data.decode(errors="replace").strip().splitlines()
             if line.strip() and not line.startswith(("Run '", "See '"))]
    return lines[-1].strip()[:500] if lines else "no message"


_ENGINE_FOLDER: str | None = None


def engine_folder() -> str:
    """The working folder of engine CLI processes: one of this process's own, removed at exit. podman's conmon
    writes an `oom` file into its working folder when a container command is OOM-killed; run from the
    caller's folder, that litters the user's project."""
    global _ENGINE_FOLDER
    if _ENGINE_FOLDER is None or not os.path.isdir(_ENGINE_FOLDER):
        import atexit  # lazy: already loaded
        import tempfile  # lazy: start-up

        _ENGINE_FOLDER = tempfile.mkdtemp(prefix="prime-engine-")
        atexit.register(shutil.rmtree, _ENGINE_FOLDER, True)
    return _ENGINE_FOLDER


async def run_cli(argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None,
                  limit: int = MAX_READ_BYTES, timeout: float | None = None) -> tuple[int | None, bytes, bytes, int, int]:
    """Run the engine CLI: (exit code or None at the host-side timeout, stdout, stderr, dropped counts)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})}, start_new_session=True, cwd=engine_folder())
    work = asyncio.gather(read_capped(proc.stdout, limit), read_capped(proc.stderr, limit), feed(proc.stdin, stdin), proc.wait())
    try:
        (out, out_dropped), (err, err_dropped), _, code = await asyncio.wait_for(work, timeout)
    except BaseException as exc:  # the host-side bound, or the caller cancelled: the client must not linger
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        work.cancel()
        with contextlib.suppress(BaseException):
            await work  # retrieved, so a cancelled exec leaves no "exception was never retrieved" on stderr
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(proc.wait(), 5)
        if isinstance(exc, TimeoutError):
            return None, b"", b"", 0, 0
        raise
    return code, out, err, out_dropped, err_dropped


class ContainerSandbox(Sandbox):
    workdir = WORKDIR

    def __init__(self, spec: SandboxSpec, engine: ContainerProvider) -> None:
        super().__init__(spec)
        self.engine = engine
        self.provider = engine.name
        self.container = f"{NAME_PREFIX}{self.id}"

    def run_argv(self, image: str) -> list[str]:
        spec = self.spec
        shm = max(spec.disk_mb // 8, 1)
        half = max((spec.disk_mb - shm) // 2, 1)
        argv = [self.engine.cli, "run", "-d", "--init", "--name", self.container, "--pull", "never", "--hostname", "sandbox",
                "--memory", f"{spec.memory_mb}m", "--memory-swap", f"{spec.memory_mb}m", "--pids-limit", str(spec.pids),
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "0:0",
                *([] if spec.writable_root else ["--read-only"]), *self.engine.run_flags, "--shm-size", f"{shm}m",
                "--tmpfs", f"{WORKDIR}:rw,exec,nosuid,nodev,size={max(spec.disk_mb - shm - half, 1)}m,mode=1777",
                "--tmpfs", f"/tmp:rw,exec,nosuid,nodev,size={half}m,mode=1777"]
        if not spec.network:
            argv += ["--network", "none"]
        if spec.cpus:
            argv += ["--cpus", f"{spec.cpus:g}"]
        for key, value in owner_labels(spec).items():
            argv += ["--label", f"{key}={value}"]
        lifetime = max(int(spec.timeout_s + 0.999), 1)
        return [*argv, image, "sleep", str(lifetime)]

    async def start(self) -> None:
        image = self.spec.image or BASE_IMAGE
        await self.engine.check_image(image)
        code, _, err, _, _ = await run_cli(self.run_argv(image), timeout=START_TIMEOUT_S)
        if code != 0:
            await self._close()
            why = "did not answer in time" if code is None else last_line(err)
            raise SandboxError(f"the {self.provider} container did not start ({why})")

    def exec_argv(self, argv: list[str], cwd: str, env: dict[str, str], timeout: float) -> tuple[list[str], dict[str, str]]:
        """The `exec` command line (variable names only) and the CLI's extra environment (their values)."""
        carried: dict[str, str] = {}
        prelude: list[str] = []
        for index, (name, value) in enumerate({**DEFAULT_ENV, **env}.items()):
            if not SHELL_NAME.match(name):
                raise ValueError(f"environment variable name {name!r} is not a valid name")
            carrier = f"PRIME_SBX_E{index}"
            carried[carrier] = value
            prelude.append(f'export {name}="${carrier}"; unset {carrier}; ')
        script = "".join(prelude) + 'exec timeout -s KILL "$0" "$@"'
        flags = [part for carrier in carried for part in ("-e", carrier)]
        command = [self.engine.cli, "exec", "-i", *USER, "-w", cwd, *flags, self.container,
                   "/bin/sh", "-c", script, f"{timeout:.3f}s", *argv]
        return command, carried

    async def _exec(self, argv, stdin, cwd, env, timeout) -> ExecResult:
        command, carried = self.exec_argv(argv, cwd, env, timeout)
        started = time.monotonic()
        code, out, err, out_dropped, err_dropped = await run_cli(
            command, stdin, carried, limit=self.spec.max_output_bytes, timeout=timeout + HOST_GRACE_S)
        elapsed = time.monotonic() - started
        timed_out = code is None or (code == KILLED_BY_TIMEOUT and elapsed >= timeout * 0.98)
        return ExecResult(exit_code=None if timed_out else code, stdout=out.decode(errors="replace"),
                          stderr=err.decode(errors="replace"), stdout_dropped=out_dropped,
                          stderr_dropped=err_dropped, timed_out=timed_out, duration_s=elapsed)

    async def _read(self, path: str) -> bytes:
        code, out, err, dropped, _ = await run_cli(
            [self.engine.cli, "exec", *USER, "-w", WORKDIR, self.container, "cat", "--", path], limit=MAX_READ_BYTES, timeout=120)
        if code is None:
            raise SandboxError(f"the {self.provider} sandbox did not answer a read of {path} in 120 s")
        if code != 0:
            raise OSError(last_line(err))
        if dropped:
            raise OSError(f"{path} is larger than {MAX_READ_BYTES} bytes")
        return out

    async def _write(self, path: str, data: bytes, mode: int) -> None:
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"'
        code, _, err, _, _ = await run_cli(
            [self.engine.cli, "exec", "-i", *USER, "-w", WORKDIR, self.container, "/bin/sh", "-c", script, "sh", path,
             f"{mode & 0o7777:o}"], stdin=data, timeout=120)
        if code is None:
            raise SandboxError(f"the {self.provider} sandbox did not answer a write of {path} in 120 s")
        if code != 0:
            raise OSError(last_line(err))

    async def _close(self) -> None:
        with contextlib.suppress(Exception):
            await run_cli(self.engine.remove_argv([self.container]), timeout=60)


class ContainerProvider(SandboxProvider):
    cli = ""
    run_flags: tuple[str, ...] = ()
    install_hint = ""
    not_answering_hint = ""

    def __init__(self) -> None:
        self._answered = False
        self._images: set[str] = set()

    def remove_argv(self, containers: list[str]) -> list[str]:
        return [self.cli, "rm", "-f", *containers]

    def unavailable_reason(self) -> str | None:
        if shutil.which(self.cli) is None:
            return f"{self.cli} is not installed: install it with `{self.install_hint}`, or pick another provider with --sandbox"
        if self._answered:
            return None
        try:
            done = subprocess.run([self.cli, "info", "--format", "{{.Host.Arch}}" if self.cli == "podman" else "{{.ServerVersion}}"],
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            return f"{self.cli} did not answer `{self.cli} info` in 30 s: {self.not_answering_hint}"
        if done.returncode != 0:
            return f"{self.cli} is not answering ({last_line(done.stderr)}): {self.not_answering_hint}"
        self._answered = True
        return None

    async def check_image(self, image: str) -> None:
        """A missing image is a one-line refusal (nothing is pulled: no registry may be reachable)."""
        if image in self._images:
            return
        code, _, _, _, _ = await run_cli([self.cli, "image", "inspect", "--format", "{{.Id}}", image], timeout=60)
        if code != 0:
            how = (f"build it with `prime sandbox image build --engine {self.name}`" if image == BASE_IMAGE
                   else f"build or pull it first (`{self.cli} pull {image}`)")
            raise SandboxUnavailable(f"the image {image} is not in {self.cli}: {how}")
        self._images.add(image)

    async def _start(self, spec: SandboxSpec) -> ContainerSandbox:
        sandbox = ContainerSandbox(spec, self)
        await sandbox.start()
        return sandbox


class PodmanProvider(ContainerProvider):
    name = "podman"
    cli = "podman"
    run_flags = ("--read-only-tmpfs=false",)  # else podman adds unsized tmpfs on /var/tmp and /run
    install_hint = "apt-get install podman runc"
    not_answering_hint = ("check /etc/containers/containers.conf (scripts/sandbox_setup.py writes the settings "
                          "hybrid-cgroup machines need) or CONTAINER_HOST")

    def remove_argv(self, containers: list[str]) -> list[str]:
        return [self.cli, "rm", "-f", "-t", "0", *containers]  # the sleep ignores SIGTERM: no 10 s wait


class DockerProvider(ContainerProvider):
    name = "docker"
    cli = "docker"
    install_hint = "apt-get install docker.io"
    not_answering_hint = "the docker daemon is not running: start it with `sudo systemctl start docker` (or `sudo dockerd &`), or set DOCKER_HOST"
