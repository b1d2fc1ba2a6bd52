"""ManagedProcess (prime_cli/serve/process.py): a child in its own session that dies with its parent, started
without loading a library between fork and exec (unsafe where other threads run, as in `prime serve`)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from prime_cli.serve.process import ManagedProcess

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
LOADED_IN_THE_CHILD = 97


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_the_child_loads_no_library_between_fork_and_exec(tmp_path, monkeypatch):
    parent, real_cdll = os.getpid(), ctypes.CDLL

    def cdll(*args, **kwargs):
        if os.getpid() != parent:  # in the forked child, before exec
            os._exit(LOADED_IN_THE_CHILD)
        return real_cdll(*args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    process = ManagedProcess(tmp_path / "child.log")
    process.start_command(SLEEPER, dict(os.environ))
    try:
        time.sleep(0.5)
        assert process.returncode is None, f"the child exited with {process.returncode} before exec"
    finally:
        process.stop(grace_s=5)


def test_the_child_leads_its_own_session_and_dies_with_a_parent_that_runs_threads(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys, threading, time
        from pathlib import Path
        from prime_cli.serve.process import ManagedProcess

        threading.Thread(target=lambda: time.sleep(60), daemon=True).start()  # like prime serve's status thread
        child = ManagedProcess(Path({str(tmp_path / "child.log")!r}))
        child.start_command({SLEEPER!r}, dict(os.environ))
        print(child.pid, flush=True)
        time.sleep(60)
        """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    pid = None
    try:
        pid = int(parent.stdout.readline())
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # stop() signals the whole group
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(pid), "the child outlived its parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)
