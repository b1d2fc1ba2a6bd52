"""`prime sandbox list|prune` on real containers: a dead owner's sandbox is found and removed, a live
owner's is kept unless --all, and nothing without prime's label is touched."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from prime_cli.sandbox import inventory
from prime_cli.sandbox.base import LABEL, OWNER_LABEL
from tests.support.cli import run_prime

ENGINES = ["podman", "docker"]


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def start_container(engine: str, image: str, owner: str | None) -> str:
    name = f"prime-sbx-test-{uuid.uuid4().hex[:10]}"
    labels = ["--label", f"{LABEL}=1", "--label", f"{OWNER_LABEL}={owner}"] if owner else ["--label", "other=1"]
    subprocess.run([engine, "run", "-d", "--init", "--network", "none", "--name", name, *labels, image, "sleep", "120"],
                   check=True, capture_output=True)
    return name


def exists(engine: str, name: str) -> bool:
    return subprocess.run([engine, "inspect", name], capture_output=True).returncode == 0


def remove(engine: str, *names: str) -> None:
    quick = ["-t", "0"] if engine == "podman" else []  # podman's rm -f otherwise waits 10 s per container
    subprocess.run([engine, "rm", "-f", *quick, *names], capture_output=True, timeout=120)


@pytest.mark.parametrize("engine", ENGINES)
def test_prune_removes_a_dead_owners_container_and_keeps_a_live_ones(engine, container_image, tmp_path):
    image = container_image(engine)
    host = os.uname().nodename
    dead = start_container(engine, image, f"{host}:{dead_pid()}")
    live = start_container(engine, image, f"{host}:{os.getpid()}")
    foreign = start_container(engine, image, None)  # not prime's: never listed, never removed
    try:
        listed = run_prime(["sandbox", "list"], cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        lines = {line.split()[1]: line for line in listed.stdout.splitlines() if line.startswith(engine)}
        assert "owner dead" in lines[dead] and "owner alive" in lines[live] and foreign not in lines

        pruned = run_prime(["sandbox", "prune"], cwd=tmp_path)
        assert pruned.returncode == 0, pruned.stderr
        assert any(line.startswith("removed") and dead in line for line in pruned.stdout.splitlines())
        assert live not in pruned.stdout
        assert not exists(engine, dead) and exists(engine, live) and exists(engine, foreign)
    finally:
        remove(engine, dead, live, foreign)


@pytest.mark.parametrize("engine", ENGINES)
def test_prune_all_removes_a_live_owners_container_too(engine, container_image, monkeypatch):
    image = container_image(engine)
    live = start_container(engine, image, f"{os.uname().nodename}:{os.getpid()}")
    elsewhere = start_container(engine, image, "another-host:1")
    try:
        mine = [item for item in inventory.containers(engine) if item.name in (live, elsewhere)]
        assert {item.alive for item in mine} == {True, None}
        # only this test's containers: --all would also take the sandboxes of tests running beside it
        monkeypatch.setattr(inventory, "list_sandboxes", lambda: (mine, []))
        assert inventory.prune()[0] == []
        removed, _ = inventory.prune(everything=True)
        assert {item.name for item in removed} == {live, elsewhere}
        assert not exists(engine, live) and not exists(engine, elsewhere)
    finally:
        remove(engine, live, elsewhere)


def test_prune_dead_owners_counts_what_it_removed(container_image):
    engines = [engine for engine in ENGINES if inventory._engine_usable(engine) is None]
    if not engines:
        pytest.skip("neither podman nor docker can run here")
    engine = engines[0]
    name = start_container(engine, container_image(engine), f"{os.uname().nodename}:{dead_pid()}")
    try:
        assert inventory.prune_dead_owners() >= 1
        assert not exists(engine, name)
    finally:
        remove(engine, name)


def test_image_build_through_the_cli(container_image, tmp_path):
    bad = run_prime(["sandbox", "image", "build", "--engine", "lxc"], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --engine must be podman or docker (got 'lxc')"
    engines = [engine for engine in ENGINES if inventory._engine_usable(engine) is None]
    if not engines:
        pytest.skip("neither podman nor docker can run here")
    container_image(engines[0])  # built and imported already: the command only checks
    built = run_prime(["sandbox", "image", "build", "--engine", engines[0]], cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == f"{engines[0]}: localhost/prime-sandbox-python:bookworm is ready"
