"""Every sandbox prime left behind, and removing them: what `prime sandbox list|prune` show and do.

Containers are found by the `prime.sandbox` label in podman and docker (where the engine answers),
with the owner (`host:pid`) from the `prime.owner` label; bwrap sandboxes die with their owner, so
what can be left of them is their cgroup folder (`cgroups.leftovers()`, owners already dead). A
container whose owner ran on another host (a shared remote engine) is never counted as dead: only
`--all` removes it. The eval runner calls `prune_dead_owners()` when a run starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import cgroups
from .base import LABEL, OWNER_LABEL

ENGINES = ("podman", "docker")
FIELD_SEP = "\x1f"


@dataclass(frozen=True)
class Leftover:
    kind: str  # podman, docker or bwrap
    name: str  # the container's name, or the cgroup folder's path
    owner: str  # host:pid
    alive: bool | None  # whether the owner process runs; None when it ran on another host
    status: str  # the container's state, or "cgroup"

    @property
    def owner_state(self) -> str:
        return {True: "owner alive", False: "owner dead", None: "owner on another host"}[self.alive]


def owner_alive(owner: str) -> bool | None:
    host, _, pid = owner.rpartition(":")
    if host != os.uname().nodename:
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except ValueError:
        return None
    return True


def _engine_usable(engine: str) -> str | None:
    """None when the engine answers, else why not (one line)."""
    from .providers import get_provider  # lazy: already loaded

    return get_provider(engine).unavailable_reason()


def containers(engine: str) -> list[Leftover]:
    listed = subprocess.run([engine, "ps", "-a", "-q", "--no-trunc", "--filter", f"label={LABEL}"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    ids = listed.stdout.split()
    if listed.returncode != 0 or not ids:
        return []
    template = FIELD_SEP.join(["{{.Name}}", f'{{{{index .Config.Labels "{OWNER_LABEL}"}}}}', "{{.State.Status}}"])
    inspected = subprocess.run([engine, "inspect", "--format", template, *ids], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)
    lines = inspected.stdout.splitlines()
    if inspected.returncode != 0 or len(lines) < len(ids):
        # one id the engine half-removed (its CLI killed mid-`rm`) fails the whole batch in podman 4.3: one by one
        lines = []
        for container_id in ids:
            one = subprocess.run([engine, "inspect", "--format", template, container_id], stdin=subprocess.DEVNULL,
                                 capture_output=True, text=True, timeout=60)
            lines += one.stdout.splitlines() if one.returncode == 0 else \
                [FIELD_SEP.join([container_id, "(unknown)", "broken"])]
    found = []
    for line in lines:
        parts = line.split(FIELD_SEP)
        if len(parts) == 3:
            name, owner, status = parts
            alive = False if status == "broken" else owner_alive(owner)  # half-removed: nothing runs in it
            found.append(Leftover(engine, name.lstrip("/"), owner, alive, status))
    return found


def cgroup_leftovers() -> list[Leftover]:
    host = os.uname().nodename
    return [Leftover("bwrap", str(folder), f"{host}:{cgroups.owner_pid(folder.name)}", False, "cgroup")
            for folder in cgroups.leftovers()]


def list_sandboxes() -> tuple[list[Leftover], list[str]]:
    """(every sandbox prime left, one line per engine that could not be asked and why)."""
    found, notes = cgroup_leftovers(), []
    for engine in ENGINES:
        if shutil.which(engine) is None:
            continue
        reason = _engine_usable(engine)
        if reason is not None:
            notes.append(f"{engine} not checked: {reason}")
            continue
        found += containers(engine)
    return found, notes


def remove(leftovers: list[Leftover]) -> list[Leftover]:
    """Remove the given sandboxes; returns those that are gone."""
    removed: list[Leftover] = []
    for engine in ENGINES:
        names = [item.name for item in leftovers if item.kind == engine]
        if not names:
            continue
        argv = [engine, "rm", "-f", *(["-t", "0"] if engine == "podman" else []), *names]
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
        still = {item.name for item in containers(engine)}
        removed += [item for item in leftovers if item.kind == engine and item.name not in still]
    for item in leftovers:
        if item.kind == "bwrap":
            folder = Path(item.name)
            cgroups.SandboxCgroup(folder.name, folders={"leftover": folder}).remove()
            if not folder.exists():
                removed.append(item)
    return removed


def prune(everything: bool = False) -> tuple[list[Leftover], list[str]]:
    """Remove what prime made whose owner is dead (or all of prime's with `everything`): (removed, notes)."""
    found, notes = list_sandboxes()
    doomed = [item for item in found if everything or item.alive is False]
    return remove(doomed), notes


def prune_dead_owners() -> int:
    """Remove the sandboxes of prime processes that died (SIGKILL) on this host; how many went."""
    with contextlib.suppress(Exception):
        return len(prune()[0])
    return 0
