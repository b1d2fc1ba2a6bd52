"""The podman and docker providers against the real engines: exec, files, limits, labels, lifecycle.

Each test runs under both engines; an engine that cannot run here is skipped with its one-line reason.
The attacks (escapes, limits under pressure) are in test_attacks.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

import pytest

from prime_cli.sandbox import get_provider
from prime_cli.sandbox.base import LABEL, OWNER_LABEL
from prime_cli.sandbox.containers import DockerProvider, PodmanProvider
from prime_cli.sandbox.spec import SandboxError, SandboxSpec, SandboxUnavailable

ENGINES = ["podman", "docker"]


def run(coro):
    return asyncio.run(coro)


def inspect(engine: str, name: str) -> dict | None:
    done = subprocess.run([engine, "inspect", name], capture_output=True, text=True)
    return json.loads(done.stdout)[0] if done.returncode == 0 else None


@pytest.mark.parametrize("engine", ENGINES)
def test_exec_exit_codes_stdin_cwd_env_and_capped_output(engine, container_image):
    image = container_image(engine)

    async def scenario():
        sandbox = await get_provider(engine).start(SandboxSpec(image=image, env={"GREETING": "hi"}, max_output_bytes=1000,
                                                              files={"data/in.txt": "hello\n"}, start_command="mkdir sub"))
        try:
            assert (await sandbox.exec("exit 3")).exit_code == 3
            assert (await sandbox.exec(["false"])).exit_code == 1
            missing = await sandbox.exec(["no-such-program"])
            assert missing.exit_code not in (0, None) and not missing.timed_out
            echoed = await sandbox.exec("cat; cat data/in.txt", input=b"from stdin\n")
            assert echoed.ok and echoed.stdout == "from stdin\nhello\n"
            where = await sandbox.exec("pwd; id -u; echo $GREETING $EXTRA $HOME", cwd="sub", env={"EXTRA": "there"})
            assert where.stdout.split("\n")[:3] == ["/sandbox/sub", "65534", "hi there /sandbox"]
            big = await sandbox.exec("head -c 5000000 /dev/zero; head -c 1500 /dev/zero >&2")
            assert big.ok and len(big.stdout) == 1000 and big.stdout_dropped == 5_000_000 - 1000
            assert len(big.stderr) == 1000 and big.stderr_dropped == 500
            python = await sandbox.exec(["python3", "-c", "import sympy, numpy; print(sympy.sqrt(8), numpy.arange(3).sum())"])
            assert python.stdout.strip() == "2*sqrt(2) 3", python.stderr
        finally:
            await sandbox.close()

    run(scenario())


@pytest.mark.parametrize("engine", ENGINES)
def test_a_timeout_kills_the_command_and_its_children_inside(engine, container_image):
    image = container_image(engine)

    async def scenario():
        sandbox = await get_provider(engine).start(SandboxSpec(image=image))
        try:
            began = time.monotonic()
            result = await sandbox.exec("sleep 30 & echo $! > /tmp/child; sleep 30", timeout=1.0)
            assert result.timed_out and result.exit_code is None and not result.ok
            assert time.monotonic() - began < 6
            child = (await sandbox.read_file("/tmp/child")).decode().strip()
            gone = await sandbox.exec(f"test -d /proc/{child} && echo alive || echo gone")
            assert gone.stdout.strip() == "gone"
            assert (await sandbox.exec("echo still usable")).ok
        finally:
            await sandbox.close()

    run(scenario())


@pytest.mark.parametrize("engine", ENGINES)
def test_files_are_binary_safe_and_a_missing_file_is_an_oserror(engine, container_image):
    image = container_image(engine)
    payload = bytes(range(256)) * 4096 + b"\x00\r\n"

    async def scenario():
        sandbox = await get_provider(engine).start(SandboxSpec(image=image))
        try:
            await sandbox.write_file("deep/er/blob.bin", payload, mode=0o600)
            assert await sandbox.read_file("/sandbox/deep/er/blob.bin") == payload
            mode = await sandbox.exec("stat -c %a deep/er/blob.bin")
            assert mode.stdout.strip() == "600"
            with pytest.raises(OSError, match="No such file"):
                await sandbox.read_file("absent.txt")
            with pytest.raises(OSError):
                await sandbox.write_file("/etc/passwd", b"x")  # read-only root
        finally:
            await sandbox.close()

    run(scenario())


@pytest.mark.parametrize("engine", ENGINES)
def test_labels_limits_no_secret_in_the_engine_and_close_removes_the_container(engine, container_image):
    image = container_image(engine)
    secret = "s3cr3t-" + os.urandom(6).hex()

    async def scenario():
        sandbox = await get_provider(engine).start(SandboxSpec(image=image, memory_mb=256, pids=32, cpus=0.5,
                                                              env={"API_KEY": secret}, labels={"prime.run": "r1"}))
        name = sandbox.container
        info = inspect(engine, name)
        try:
            labels = info["Config"]["Labels"]
            assert labels[LABEL] == "1" and labels["prime.run"] == "r1"
            assert labels[OWNER_LABEL] == f"{os.uname().nodename}:{os.getpid()}"
            host = info["HostConfig"]
            assert host["Memory"] == 256 * 2**20 and host["PidsLimit"] == 32 and host["ReadonlyRootfs"]
            assert host["NetworkMode"] == "none"
            caps = await sandbox.exec("grep -E '^Cap(Eff|Bnd|Prm):' /proc/self/status")
            assert caps.stdout.split()[1::2] == ["0000000000000000"] * 3, caps.stdout
            assert secret not in json.dumps(info)  # the value lives only in each exec's environment
            assert (await sandbox.exec("echo $API_KEY")).stdout.strip() == secret
            argv, carried = sandbox.exec_argv(["true"], "/sandbox", {"API_KEY": secret}, 5.0)
            assert secret not in " ".join(argv) and secret in carried.values()
        finally:
            await sandbox.close()
        assert inspect(engine, name) is None
        await sandbox.close()  # twice is fine

    run(scenario())


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failing_start_is_a_sandbox_error_with_the_engines_reason(engine, container_image):
    container_image(engine)
    provider = get_provider(engine)
    with pytest.raises(SandboxError, match=r"container did not start \(.*[Mm]emory") as failed:
        run(provider.start(SandboxSpec(image=container_image(engine), memory_mb=1, env={"TOKEN": "do-not-show-me"})))
    assert "do-not-show-me" not in str(failed.value) and "\n" not in str(failed.value)
    with pytest.raises(SandboxUnavailable, match="image localhost/no-such-image:1 is not in"):
        run(provider.start(SandboxSpec(image="localhost/no-such-image:1")))


@pytest.mark.parametrize("provider_class,hint", [(PodmanProvider, "apt-get install podman runc"),
                                                 (DockerProvider, "apt-get install docker.io")])
def test_a_missing_engine_cli_is_one_line_naming_the_install(provider_class, hint, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = provider_class().unavailable_reason()
    assert reason is not None and hint in reason and "\n" not in reason


def test_a_docker_daemon_that_does_not_answer_is_one_line(monkeypatch, tmp_path):
    if get_provider("docker").unavailable_reason() is not None and "not installed" in get_provider("docker").unavailable_reason():
        pytest.skip("the docker CLI is not installed")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    reason = DockerProvider().unavailable_reason()
    assert reason is not None and "daemon is not running" in reason and "\n" not in reason
