"""The sandbox interface under bwrap and none: exec, files, limits of output and time, lifecycle, choice.

The security boundary itself is tested by test_attacks.py; here, that the interface does what its
docstrings promise, and that a sandbox never outlives its owner (close, lifetime, SIGKILL).
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from prime_cli import sandbox as sb
from prime_cli.sandbox import cgroups
from prime_cli.sandbox.spec import SandboxError, SandboxSpec, SandboxUnavailable

REPO = Path(__file__).resolve().parents[2]
PROVIDERS = [
    pytest.param("bwrap", marks=pytest.mark.skipif(sb.get_provider("bwrap").unavailable_reason() is not None,
                                                    reason=str(sb.get_provider("bwrap").unavailable_reason()))),
    "none",
]


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_exec_files_and_output(provider):
    async def scenario():
        spec = SandboxSpec(files={"data/in.txt": "hello\n"}, start_command="echo started > started.txt",
                           env={"GREETING": "hi"}, max_output_bytes=1000)
        async with await sb.start_sandbox(spec, provider) as box:
            shell = await box.exec("cat data/in.txt; echo $GREETING; cat started.txt; exit 3")
            assert (shell.exit_code, shell.stdout) == (3, "hello\nhi\nstarted\n")
            argv = await box.exec([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); "
                                   "print('oops', file=sys.stderr)"], input="abc")
            assert argv.ok and argv.stdout == "ABC\n" and argv.stderr == "oops\n"
            sub = await box.exec("pwd", cwd="data")
            assert sub.stdout.strip().endswith("/data")
            flood = await box.exec([sys.executable, "-c", "print('x' * 5000)"])
            assert len(flood.stdout) == 1000 and flood.stdout_dropped == 4001
            await box.write_file("bin/blob", bytes(range(256)))
            assert await box.read_file("bin/blob") == bytes(range(256))
            missing = await box.exec(["no-such-program"])
            assert missing.exit_code == 127 and "no-such-program" in missing.stderr
            with pytest.raises(OSError):
                await box.read_file("nope.txt")
            many = await asyncio.gather(*(box.exec(f"echo {i}") for i in range(20)))
            assert [r.stdout.strip() for r in many] == [str(i) for i in range(20)]
        with pytest.raises(SandboxError):
            await box.exec("true")
        await box.close()  # twice is fine
    run(scenario())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_kills_the_command_and_its_children(provider):
    async def scenario():
        async with await sb.start_sandbox(SandboxSpec(), provider) as box:
            began = time.monotonic()
            result = await box.exec("sleep 30 & echo $! > child.pid; sleep 30", timeout=0.5)
            assert result.timed_out and result.exit_code is None
            assert time.monotonic() - began < 5
            child = (await box.read_file("child.pid")).decode().strip()
            # gone, or a zombie waiting for its reaper (outside a pid namespace that is the host's init)
            check = await box.exec(f"cut -d' ' -f3 /proc/{child}/stat 2>/dev/null || echo gone")
            assert check.stdout.strip() in ("gone", "Z")
            assert (await box.exec("echo still usable")).ok
    run(scenario())


def test_lifetime_limit_kills_the_sandbox():
    async def scenario():
        box = await sb.start_sandbox(SandboxSpec(timeout_s=1.0), "none")
        assert (await box.exec("true")).ok
        await asyncio.sleep(1.5)
        with pytest.raises(SandboxError, match="lifetime"):
            await box.exec("true")
        await box.close()
    run(scenario())


def test_a_failing_start_command_is_a_sandbox_error_and_is_counted():
    async def scenario():
        sb.STATS.reset()
        with pytest.raises(SandboxError, match="start command failed"):
            await sb.start_sandbox(SandboxSpec(start_command="echo broken >&2; exit 4"), "none")
        box = await sb.start_sandbox(SandboxSpec(), "none")
        await box.close()
        summary = sb.STATS.summary()["none"]
        assert (summary["started"], summary["failed"]) == (1, 1)
        assert "none (unsandboxed) 1 started, 1 failed" in sb.summary_line(sb.STATS.summary())
        assert not sb.LIVE
    run(scenario())


def test_provider_precedence(monkeypatch):
    monkeypatch.delenv(sb.providers.ENV_VAR, raising=False)
    sb.use_provider(None)
    assert sb.chosen_name() == "bwrap"
    assert sb.chosen_name("podman") == "podman"
    monkeypatch.setenv(sb.providers.ENV_VAR, "docker")
    assert sb.chosen_name("podman") == "docker"
    sb.use_provider("none")
    try:
        assert sb.chosen_name("podman") == "none"
    finally:
        sb.use_provider(None)
    with pytest.raises(SandboxUnavailable, match="pick one of bwrap, podman, docker, none"):
        sb.use_provider("firejail")


def test_missing_bubblewrap_names_the_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(sb.providers.ENV_VAR, raising=False)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        sb.provider_for("bwrap")


@pytest.mark.skipif(sb.get_provider("bwrap").unavailable_reason() is not None, reason="bubblewrap is not usable here")
def test_sigkill_of_the_owner_leaves_no_process_and_prune_finds_its_cgroup(tmp_path):
    marker = f"prime-test-orphan-{os.getpid()}"
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(REPO)!r})
        from prime_cli import sandbox as sb
        async def main():
            box = await sb.start_sandbox(sb.SandboxSpec(), "bwrap")
            await box.exec(sys.executable + " -c 'import time; time.sleep(300)' {marker} > /dev/null 2>&1 &")
            print("ready", flush=True)
            await asyncio.sleep(300)
        asyncio.run(main())
    """))
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        assert _processes_named(marker), "the sandboxed sleeper did not start"
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 20  # die-with-parent and the cgroup kill are prompt; a loaded CI machine is not
        while _processes_named(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_named(marker), "a sandboxed process outlived its SIGKILLed owner"
    finally:
        owner.kill()
    left = [folder for folder in cgroups.leftovers() if cgroups.owner_pid(folder.name) == owner.pid]
    if cgroups.create("prime-sbx-probe", None, 64, 8).folders:  # cgroups are writable here
        assert left, "the dead owner's cgroup is not found by leftovers()"
    for folder in left:
        _rmdir_when_empty(folder)
    for folder in Path("/sys/fs/cgroup").glob("*/**/prime-sbx-probe"):
        folder.rmdir()


def _rmdir_when_empty(folder: Path, wait_s: float = 20) -> None:
    """A cgroup is removable once its last task is reaped; a killed sandbox's zombies may take a moment
    (v1 answers EBUSY until then)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            folder.rmdir()
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _processes_named(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_processes_kills_what_the_model_left_and_keeps_the_files(provider):
    async def scenario():
        async with await sb.start_sandbox(SandboxSpec(), provider) as box:
            await box.exec("echo kept > notes.txt; (while true; do echo tampered > notes.txt; sleep 0.05; done) "
                           "> /dev/null 2>&1 &")
            await box.stop_processes()
            await box.write_file("notes.txt", "graded\n")
            await asyncio.sleep(0.3)
            assert await box.read_file("notes.txt") == b"graded\n"
            assert (await box.exec("echo still usable")).stdout == "still usable\n"
    run(scenario())


def test_stop_processes_unsandboxed_kills_only_its_own_commands():
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        test_stop_processes_kills_what_the_model_left_and_keeps_the_files("none")
        assert bystander.poll() is None, "stop_processes of an unsandboxed sandbox killed a process it did not start"
    finally:
        bystander.kill()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_daemon_left_by_a_command_dies_at_close(provider):
    marker = f"prime-test-daemon-{provider}-{os.getpid()}"
    daemon = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              "        time.sleep(300)\n    os._exit(0)\nos._exit(0)\n")

    async def scenario():
        box = await sb.start_sandbox(SandboxSpec(), provider)
        await box.exec([sys.executable, "-c", daemon, marker])
        assert _processes_named(marker), "the daemon did not start"
        await box.close()
    run(scenario())
    deadline = time.monotonic() + 5
    while _processes_named(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_named(marker), "a double-forked daemon outlived close()"
