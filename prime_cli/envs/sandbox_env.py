"""`SandboxEnv`: a `bash` tool that runs in the rollout's own sandbox (prime_cli.sandbox).

Constructor names follow verifiers' SandboxEnv (`docker_image`, `start_command`, `cpu_cores`,
`memory_gb`, `disk_size_gb`, `timeout_minutes`, `timeout_per_command_seconds`, `environment_vars`,
`labels`, `max_retries`, `base_delay`, `backoff_factor`), mapped onto a `SandboxSpec`; plus
`sandbox_provider`, the provider this environment asks for (the user's `--sandbox` / `PRIME_SANDBOX`
wins over it).

Lifecycle of one rollout's sandbox:
- started lazily, at the first tool call that needs it (or by `post_rollout` when the model never
  called a tool), then `setup_sandbox(sandbox, state)` copies files in;
- a start that fails (`SandboxError`) is retried `max_retries` times with a backoff, then the
  rollout ends with an `InfraError` in `state["error"]`: an errored rollout, never a reward of 0,
  never the end of the eval. A sandbox that dies mid-rollout ends it the same way;
- when the rollout ends (whatever the reason) the cleanup handler runs `post_rollout(sandbox,
  state)` first, when the rollout has no error (after the model's leftover processes are killed),
  then closes the sandbox. Cleanup runs before scoring, so a reward function reads what
  `post_rollout` stored in `state`.
A command's nonzero exit or timeout is the model's business: it comes back as the tool's output.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import Any

from prime_cli.sandbox import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    start_sandbox,
)

from .decorators import cleanup
from .errors import InfraError, error_record, traceback_text
from .tool_env import StatefulToolEnv
from .types import Messages, State

logger = logging.getLogger("prime_cli.envs")

SANDBOX_ID = "sandbox_id"  # the state key and hidden tool argument naming the rollout's sandbox
KEEP_ALIVE_COMMANDS = {"tail -f /dev/null", "sleep infinity"}  # verifiers' keep-alive: our sandboxes stay up by themselves


def format_exec_result(result: ExecResult, timeout: float | None = None) -> str:
    """A command's result as the model reads it: output, then what went wrong (exit code, timeout,
    dropped bytes)."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    notes = []
    if result.timed_out:
        limit = f" after {timeout:g} s" if timeout else ""
        notes.append(f"timed out{limit}: the command was killed")
    elif result.exit_code not in (0, None):
        notes.append(f"exit code {result.exit_code}")
    for name, dropped in (("stdout", result.stdout_dropped), ("stderr", result.stderr_dropped)):
        if dropped:
            notes.append(f"{dropped} more bytes of {name} were dropped (output is capped)")
    parts += [f"[{note}]" for note in notes]
    return "\n".join(parts) if parts else "(no output)"


@dataclasses.dataclass
class _RolloutSandbox:
    state: State
    sandbox: Sandbox | None = None
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)


class SandboxEnv(StatefulToolEnv):
    def __init__(
        self,
        sandbox_name: str = "sandbox-env",
        docker_image: str | None = None,
        start_command: str | None = None,
        cpu_cores: float = 1,
        memory_gb: float = 1,
        disk_size_gb: float = 0.5,
        timeout_minutes: float = 60,
        timeout_per_command_seconds: float = 30,
        environment_vars: dict[str, str] | None = None,
        labels: list[str] | dict[str, str] | None = None,
        network_access: bool = False,
        max_pids: int = 64,
        max_output_bytes: int = 16384,
        sandbox_provider: str | None = None,
        max_retries: int = 2,
        base_delay: float = 0.5,
        backoff_factor: float = 2.0,
        stop_errors: list[type[BaseException]] | None = None,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            sandbox_name: a name recorded as the sandbox's `prime.name` label.
            docker_image: a container image (podman/docker) or an unpacked root filesystem folder
                (bwrap); None: the host's system files read-only (bwrap) or prime's base image.
            start_command: a shell command run once after the sandbox starts; it must end
                (verifiers' keep-alive `tail -f /dev/null` is not needed and is ignored).
            cpu_cores / memory_gb / disk_size_gb / max_pids: the sandbox's limits, summed over its
                processes (the kernel enforces them: cgroups, a sized tmpfs).
            timeout_minutes: the sandbox's whole life. timeout_per_command_seconds: one command.
            environment_vars: set for every command. network_access: off by default.
            max_output_bytes: of stdout and of stderr, per command, shown to the model.
            sandbox_provider: bwrap, podman, docker or none; the user's --sandbox wins.
            max_retries / base_delay / backoff_factor: retries of a failed sandbox start.
        """
        super().__init__(stop_errors=[InfraError, *(stop_errors or [])], **kwargs)
        if start_command and start_command.strip() in KEEP_ALIVE_COMMANDS:
            start_command = None
        label_map = dict(labels) if isinstance(labels, dict) else {f"prime.tag.{tag}": "1" for tag in labels or []}
        self.sandbox_name = sandbox_name
        self.sandbox_provider = sandbox_provider
        self.timeout_per_command_seconds = float(timeout_per_command_seconds)
        self.max_retries = max(int(max_retries), 0)
        self.base_delay = float(base_delay)
        self.backoff_factor = float(backoff_factor)
        self.sandbox_spec = SandboxSpec(
            image=docker_image, cpus=float(cpu_cores) if cpu_cores else None, memory_mb=int(memory_gb * 1024),
            pids=int(max_pids), disk_mb=max(int(disk_size_gb * 1024), 1), timeout_s=float(timeout_minutes) * 60,
            command_timeout_s=self.timeout_per_command_seconds, network=bool(network_access),
            env=dict(environment_vars or {}), start_command=start_command, max_output_bytes=int(max_output_bytes),
            labels={"prime.name": sandbox_name, **label_map},
        )
        self._rollouts: dict[str, _RolloutSandbox] = {}
        self.add_tool(self.bash, args_to_skip=[SANDBOX_ID])

    # -- what authors override ---------------------------------------------------------------------

    def get_sandbox_spec(self, state: State | None = None) -> SandboxSpec:
        """The spec of a rollout's sandbox (override for a per-row image or limits); with `state`
        None, the environment's default, which the eval runner reads before any rollout."""
        return self.sandbox_spec

    async def setup_sandbox(self, sandbox: Sandbox, state: State) -> None:
        """Runs once, right after the rollout's sandbox started: copy files in (`sandbox.write_file`),
        run setup commands. A `SandboxError` here is retried like a failed start."""

    async def prepare_sandbox(self, sandbox: Sandbox, state: State) -> None:
        """What a freshly started sandbox gets before the model uses it: `setup_sandbox` here; a
        subclass such as PythonEnv adds its own (the REPL) so authors override `setup_sandbox` freely."""
        await self.setup_sandbox(sandbox, state)

    async def post_rollout(self, sandbox: Sandbox, state: State) -> None:
        """Runs after the agent finished, before the sandbox is closed and before scoring (only for
        a rollout without an error): run the tests, read results out, store them in `state` for a
        reward function."""

    # -- the tool ----------------------------------------------------------------------------------

    async def bash(self, command: str, sandbox_id: str) -> str:
        """Run a shell command in this conversation's sandbox and return its output.

        Args:
            command: a shell command (run by /bin/sh in the sandbox's work folder).
        """
        sandbox = await self.get_sandbox(sandbox_id)
        result = await self.run_in_sandbox(sandbox, command, timeout=self.timeout_per_command_seconds)
        return format_exec_result(result, self.timeout_per_command_seconds)

    async def run_in_sandbox(self, sandbox: Sandbox, command: Any, **kwargs: Any) -> ExecResult:
        """`sandbox.exec`, with a sandbox failure (it died, its agent broke) ending the rollout as an
        infrastructure error."""
        try:
            return await sandbox.exec(command, **kwargs)
        except SandboxError as exc:
            raise InfraError(f"the sandbox failed: {exc}") from exc

    # -- per-rollout bookkeeping -------------------------------------------------------------------

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        state = await super().setup_state(state, **kwargs) or state
        state[SANDBOX_ID] = uuid.uuid4().hex
        self._rollouts[state[SANDBOX_ID]] = _RolloutSandbox(state)
        return state

    def update_tool_args(self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State,
                         **kwargs: Any) -> dict[str, Any]:
        return {**tool_args, SANDBOX_ID: state[SANDBOX_ID]}

    async def get_sandbox(self, sandbox_id: str) -> Sandbox:
        """The rollout's sandbox, started (with retries) and set up on first use."""
        entry = self._rollouts.get(sandbox_id)
        if entry is None:
            raise InfraError(f"no sandbox for rollout {sandbox_id}: the rollout has ended")
        async with entry.lock:
            if entry.sandbox is None:
                entry.sandbox = await self._start_with_retries(entry.state)
            elif entry.sandbox.closed:  # its files and processes are gone: the rollout cannot go on
                raise InfraError(f"the rollout's sandbox {entry.sandbox.id} was closed or died")
            return entry.sandbox

    async def _start_with_retries(self, state: State) -> Sandbox:
        spec = self.get_sandbox_spec(state)
        delay = self.base_delay
        for attempt in range(self.max_retries + 1):
            sandbox: Sandbox | None = None
            try:
                sandbox = await start_sandbox(spec, self.sandbox_provider)
                await self.prepare_sandbox(sandbox, state)
                state.setdefault("sandbox", {}).update(provider=sandbox.provider, id=sandbox.id, attempts=attempt + 1)
                return sandbox
            except SandboxUnavailable as exc:
                raise InfraError(str(exc)) from exc
            except SandboxError as exc:
                if sandbox is not None:
                    await sandbox.close()
                if attempt == self.max_retries:
                    tries = f" ({attempt + 1} attempts)" if attempt else ""
                    raise InfraError(f"the sandbox could not start{tries}: {exc}") from exc
                logger.warning("sandbox start failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay *= self.backoff_factor
            except BaseException:
                if sandbox is not None:
                    await sandbox.close()
                raise
        raise AssertionError("unreachable")

    def _has_post_rollout(self) -> bool:
        return type(self).post_rollout is not SandboxEnv.post_rollout

    @cleanup(priority=-50)
    async def close_sandbox(self, state: State) -> None:
        """post_rollout (when the rollout has no error), then the sandbox is closed, always."""
        entry = self._rollouts.get(state.get(SANDBOX_ID))  # type: ignore[arg-type]
        if entry is None:
            return
        try:
            if state.get("error") is None and self._has_post_rollout():
                await self._post_rollout(entry, state)
        finally:
            self._rollouts.pop(state.get(SANDBOX_ID), None)  # type: ignore[arg-type]
            if entry.sandbox is not None:
                await entry.sandbox.close()

    async def _post_rollout(self, entry: _RolloutSandbox, state: State) -> None:
        try:
            sandbox = await self.get_sandbox(state[SANDBOX_ID])
            stop = getattr(sandbox, "stop_processes", None)
            if stop is not None:  # nothing the model left running may touch what the grader checks
                await stop()
            await self.post_rollout(sandbox, state)
        except Exception as exc:  # the rollout is errored (counted and shown), not scored
            if isinstance(exc, SandboxError):
                exc = InfraError(f"the sandbox failed during post_rollout: {exc}")
            state["error"] = error_record(exc)
            state["error_traceback"] = traceback_text(exc)
            state["stop_condition"] = "has_error"
            logger.warning("example %s: post_rollout failed: %s: %s", state.get("example_id"), type(exc).__name__, exc)
