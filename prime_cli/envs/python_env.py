"""`PythonEnv`: a persistent Python REPL in the rollout's sandbox, as a `python(code)` tool.

A `SandboxEnv` whose sandbox runs a small standard-library REPL server (python_repl_server.py),
started in the background by one `exec` and reached through a unix socket in the sandbox's work
folder by a tiny client run with `exec` per call, so it works alike under every provider. Variables
persist across the rollout's calls; a final expression's value is printed (notebook cells); output
is capped and the dropped bytes counted; each call has a CPU limit (the code gets
`CPUTimeExceeded`, variables kept) and a wall-clock limit (the REPL is killed and restarted, and the
model is told its variables are gone).

The interpreter is the sandbox's: under bwrap (or none) without an image, the Python prime runs on
(its packages are visible, read-only); with an image, the image's `python3`. `pip_install_packages`
(verifiers' name) lists what the REPL needs; they are checked when the REPL starts, since the
network is off: a missing one is an infrastructure error naming it and where to install it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from prime_cli.sandbox import Sandbox

from .errors import InfraError, ToolCallError
from .sandbox_env import SandboxEnv
from .types import State

SERVER_SOURCE = Path(__file__).with_name("python_repl_server.py")
REPL_DIR = ".prime_repl"  # in the sandbox's work folder: the server script, its socket and pid file
STARTUP_TIMEOUT_S = 30.0
NO_OUTPUT = "(no output: print() values, or end the code with an expression)"


def module_names(packages: str | list[str] | None) -> list[str]:
    """`"numpy sympy scikit-learn>=1"` -> ["numpy", "sympy", "scikit_learn"]; `dist:module` names the module."""
    items = packages.split() if isinstance(packages, str) else list(packages or [])
    names = []
    for item in items:
        name = item.split(":", 1)[1] if ":" in item else re.split(r"[<>=!~\[;@ ]", item, maxsplit=1)[0]
        if name:
            names.append(name.replace("-", "_"))
    return names


class PythonEnv(SandboxEnv):
    def __init__(
        self,
        pip_install_packages: str | list[str] = "",
        max_startup_wait_seconds: float = STARTUP_TIMEOUT_S,
        cpu_seconds_per_call: float | None = 10,
        python_memory_mb: int | None = None,
        max_output_bytes: int = 8192,
        refuse_processes: bool = False,
        keep_bash: bool = False,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            pip_install_packages: modules the REPL needs (space-separated or a list), checked at start.
                They must already be in the sandbox's Python: prime's venv under bwrap without an
                image, else the image.
            max_startup_wait_seconds: how long the REPL may take to start.
            cpu_seconds_per_call: CPU seconds one call may use (None: no limit but the wall clock,
                `timeout_per_command_seconds`).
            python_memory_mb: address-space limit of the REPL process (a MemoryError rather than
                the sandbox's memory limit killing it); None: only the sandbox's limit.
            max_output_bytes: output of one call shown to the model.
            refuse_processes: an early, friendly PermissionError for code that starts processes,
                sends signals or opens sockets (not a boundary: the sandbox is).
            keep_bash: also offer SandboxEnv's `bash` tool.
        """
        super().__init__(max_output_bytes=6 * max_output_bytes + 65536, **kwargs)  # the reply is JSON
        if not keep_bash:
            self.remove_tool(self.bash)
        self.packages = module_names(pip_install_packages)
        self.max_startup_wait_seconds = float(max_startup_wait_seconds)
        self.cpu_seconds_per_call = cpu_seconds_per_call
        self.python_memory_mb = python_memory_mb
        self.repl_output_bytes = int(max_output_bytes)
        self.refuse_processes = refuse_processes
        self.add_tool(self.python, args_to_skip=["sandbox_id"])

    # -- the REPL ----------------------------------------------------------------------------------

    def interpreter(self, sandbox: Sandbox) -> str:
        if sandbox.provider in ("bwrap", "none") and not sandbox.spec.image:
            return sys.executable
        return "python3"

    def _paths(self, sandbox: Sandbox) -> dict[str, str]:
        folder = f"{sandbox.workdir.rstrip('/')}/{REPL_DIR}"
        return {"dir": folder, "script": f"{folder}/repl.py", "socket": f"{folder}/repl.sock", "pid": f"{folder}/server.pid"}

    async def prepare_sandbox(self, sandbox: Sandbox, state: State) -> None:
        await super().prepare_sandbox(sandbox, state)
        await self.start_repl(sandbox)

    async def start_repl(self, sandbox: Sandbox) -> None:
        paths = self._paths(sandbox)
        await sandbox.write_file(paths["script"], SERVER_SOURCE.read_text())
        config = {"socket": paths["socket"], "pid_file": paths["pid"], "packages": self.packages,
                  "max_output": self.repl_output_bytes, "memory_mb": self.python_memory_mb,
                  "refuse_processes": self.refuse_processes}
        python = self.interpreter(sandbox)
        result = await self.run_in_sandbox(sandbox, [python, "-I", paths["script"], "serve", json.dumps(config)],
                                           timeout=self.max_startup_wait_seconds,
                                           env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        reply = _last_json(result.stdout)
        if reply is None or not result.ok:
            detail = (result.stderr or result.stdout).strip()[-400:] or f"exit code {result.exit_code}"
            if result.timed_out:
                detail = f"it did not start within {self.max_startup_wait_seconds:g} s"
            raise InfraError(f"the Python REPL did not start in the sandbox ({python}): {detail}")
        if reply.get("missing"):
            where = ("prime's Python environment (pip install into its venv)" if python == sys.executable
                     else f"the sandbox image ({sandbox.spec.image or 'the provider default'})")
            names = ", ".join(reply["missing"])
            raise InfraError(f"package(s) {names} not importable in the sandbox's Python {reply.get('python')}: "
                             f"install them in {where}; the sandbox has no network to install them itself")

    async def python(self, code: str, sandbox_id: str) -> str:
        """Run Python code in this conversation's interpreter and return what it printed.

        Args:
            code: Python source. Variables and imports persist between calls; the value of a final
                expression is printed.
        """
        sandbox = await self.get_sandbox(sandbox_id)
        reply = await self._call(sandbox, code)
        note = ""
        if reply.get("dead"):  # it stopped since the last call (killed, exited, out of memory)
            await self.start_repl(sandbox)
            note = "[the Python session had stopped; it was restarted and earlier variables are gone]\n"
            reply = await self._call(sandbox, code)
            if reply.get("dead"):
                raise ToolCallError(note + "the Python session stopped while running this code")
        try:
            return note + self.format_reply(reply)
        except ToolCallError as exc:
            raise ToolCallError(note + str(exc)) from None

    async def _call(self, sandbox: Sandbox, code: str) -> dict[str, Any]:
        wall = self.timeout_per_command_seconds
        request = {"code": code, "cpu_seconds": self.cpu_seconds_per_call or 0, "wall_seconds": wall}
        paths = self._paths(sandbox)
        result = await self.run_in_sandbox(sandbox, [self.interpreter(sandbox), "-I", "-S", paths["script"], "call", paths["socket"]],
                                           input=json.dumps(request), timeout=wall + 10)
        reply = _last_json(result.stdout)
        if result.timed_out or reply is None:
            await self.run_in_sandbox(sandbox, ["/bin/sh", "-c", f"kill -9 -$(cat {paths['pid']}) 2>/dev/null; true"], timeout=10)
            return {"timeout": True}
        return reply

    def format_reply(self, reply: dict[str, Any]) -> str:
        """The tool's text; raises ToolCallError (shown to the model as an error) on any failure."""
        if reply.get("timeout"):
            raise ToolCallError(f"TimeoutError: the code ran longer than {self.timeout_per_command_seconds:g} s and "
                                "was killed; the Python session was restarted, so earlier variables are gone")
        text = str(reply.get("output") or "")
        problems = []
        if reply.get("dropped"):
            problems.append(f"OutputLimitExceeded: only the first {self.repl_output_bytes} bytes of output are shown "
                            f"({reply['dropped']} more bytes were dropped)")
        if reply.get("error"):
            problems.append(str(reply["error"]).rstrip())
        if problems:
            raise ToolCallError("\n".join(filter(None, [text.rstrip(), *problems])))
        return text if text.strip() else NO_OUTPUT


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None
