"""Run `prime` as a user does: the installed console script in a subprocess, or in a pseudo-terminal.

    result = run_prime(["eval", "run", "reverse-text", "-b", url], cwd=tmp_path)
    with TerminalSession(["eval", "tui"], cwd=tmp_path) as term:
        term.wait_for("reverse-text")
        term.send("q")
        assert term.wait_exit() == 0

The script is the one next to the running interpreter (`.venv/bin/prime`), so a test goes through the
same entry point, argument parsing and imports as the command a user types.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRIME = Path(sys.executable).parent / "prime"


def prime_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{PRIME.parent}{os.pathsep}{env.get('PATH', '')}"  # pasted commands find `prime`
    env.setdefault("PRIME_CACHE_DIR", str(Path.home() / ".cache" / "prime"))
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "160"
    env.update(extra or {})
    return env


def run_prime(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None,
              timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess:
    assert PRIME.is_file(), f"{PRIME} is not installed; run `make setup`"
    return subprocess.run([str(PRIME), *args], cwd=cwd, env=prime_env(extra_env), capture_output=True,
                          text=True, timeout=timeout, input=input)


def main_in_process(args: list[str], capsys) -> tuple[int, str, str]:
    """`prime ARGS` through the CLI entry point in this process (exit code, stdout, stderr): for tests that
    need to monkeypatch the engine, or run many cases fast."""
    import pytest

    from prime_cli.cli.main import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def run_shell(command: str, cwd: Path, extra_env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess:
    """A command line exactly as printed for the user to paste (e.g. a resume command)."""
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=prime_env(extra_env), capture_output=True,
                          text=True, timeout=timeout)


class TerminalSession:
    """`prime ARGS` in a pseudo-terminal (pexpect), its screen rendered by a VT100 emulator (pyte)."""

    def __init__(self, args: list[str], cwd: Path, columns: int = 140, lines: int = 40,
                 extra_env: dict[str, str] | None = None) -> None:
        import pexpect
        import pyte

        env = prime_env(extra_env)
        env.pop("NO_COLOR", None)
        env.update({"TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines)})
        self.screen = pyte.Screen(columns, lines)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""
        self.child = pexpect.spawn(str(PRIME), list(args), cwd=str(cwd), env=env,
                                   dimensions=(lines, columns))

    def __enter__(self) -> TerminalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)

    def _pump(self, timeout: float) -> None:
        import pexpect

        try:
            data = self.child.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF:
            return
        self.raw += data
        self.stream.feed(data)

    def _drain(self) -> None:
        for _ in range(50):
            before = len(self.raw)
            self._pump(0.1)
            if len(self.raw) == before:
                return

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, *needles: str, timeout: float = 30.0) -> str:
        """The screen once every needle is on it at the same time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._pump(0.2)
            if all(needle in self.text() for needle in needles):
                return self.text()
            if not self.child.isalive():
                self._drain()  # output written just before exit may still be in the pty
                if all(needle in self.text() for needle in needles):
                    return self.text()
                break
        raise AssertionError(f"{needles!r} never all appeared on screen; screen was:\n{self.text()}\n"
                             f"raw tail: {self.raw[-2000:].decode(errors='replace')}")

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def wait_exit(self, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            self._pump(0.2)
        if self.child.isalive():
            raise AssertionError(f"prime did not exit; screen was:\n{self.text()}")
        self._pump(0.1)
        self.child.close()
        return self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0)
