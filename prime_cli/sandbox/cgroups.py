"""A cgroup per sandbox for the limits bubblewrap does not have: memory, pids and CPU.

cgroup v2 (one unified tree with the controllers delegated to us) or v1 (one hierarchy per
controller, as on hybrid machines without systemd). The folder is made under the caller's own
cgroup (from /proc/self/cgroup) as `prime-sbx-<pid>-<id>`, so `prune` can tell a dead owner's
leftovers. The launcher joins it (`join_command`) before it execs bwrap; children stay inside.
Where a controller is missing or not writable, its limit is reported as unenforced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "prime-sbx-"
V1_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000


def _own_path(controller: str | None) -> str | None:
    """The caller's cgroup path for a v1 controller, or the unified one (controller None)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (controller is None and names == "") or (controller and controller in names.split(",")):
                return path
    return None


def _unified_controllers() -> set[str]:
    with contextlib.suppress(OSError):
        own = _own_path(None)
        if own is not None and (ROOT / "cgroup.controllers").exists():
            return set((ROOT / own.lstrip("/") / "cgroup.controllers").read_text().split())
    return set()


@dataclass
class SandboxCgroup:
    name: str
    folders: dict[str, Path] = field(default_factory=dict)  # controller (or "unified") -> folder
    unenforced: list[str] = field(default_factory=list)

    @property
    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in dict.fromkeys(self.folders.values())]

    def join_command(self) -> list[str]:
        """`sh -c` that moves itself into the cgroup, then execs the rest of argv."""
        if not self.folders:
            return []
        return ["/bin/sh", "-c", 'for f in ' + " ".join(f"'{p}'" for p in self.procs_files) +
                '; do echo $$ > "$f" || exit 99; done; exec "$@"', "prime-sandbox-launcher"]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                found |= {int(word) for word in Path(path).read_text().split()}
        return found

    def remove(self) -> None:
        """Kill whatever is left inside, then remove the folders (a cgroup with processes cannot go)."""
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for folder in dict.fromkeys(self.folders.values()):
            with contextlib.suppress(OSError):
                folder.rmdir()


def create(name: str, cpus: float | None, memory_mb: int, pids: int) -> SandboxCgroup:
    group = SandboxCgroup(name)
    wanted = {"memory": memory_mb, "pids": pids, "cpu": cpus}
    unified = _unified_controllers()
    if unified & {"memory", "pids", "cpu"}:
        folder = ROOT / (_own_path(None) or "/").lstrip("/") / name
        if _try_mkdir(folder):
            for controller in V1_CONTROLLERS:
                if controller in unified:
                    group.folders[controller] = folder
    for controller in V1_CONTROLLERS:
        if controller in group.folders or wanted[controller] is None:
            continue
        own = _own_path(controller)
        base = ROOT / controller
        if own is None or not base.is_dir():
            continue
        folder = base / own.lstrip("/") / name
        if _try_mkdir(folder):
            group.folders[controller] = folder
    _write_limits(group, wanted)
    return group


def _try_mkdir(folder: Path) -> bool:
    try:
        folder.mkdir()
        return True
    except FileExistsError:
        return True
    except OSError:
        return False


def _write_limits(group: SandboxCgroup, wanted: dict) -> None:
    memory, pids, cpus = wanted["memory"] * 1024 * 1024, wanted["pids"], wanted["cpu"]
    plans: dict[str, list[tuple[str, str]]] = {
        "memory": [("memory.max", str(memory)), ("memory.swap.max", "0")] if _is_unified(group, "memory") else
                  [("memory.limit_in_bytes", str(memory)), ("memory.memsw.limit_in_bytes", str(memory))],
        "pids": [("pids.max", str(pids))],
        "cpu": ([("cpu.max", f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")] if _is_unified(group, "cpu") else
                [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", str(int(cpus * CPU_PERIOD_US)))])
                if cpus else [],
    }
    for controller, writes in plans.items():
        if controller == "cpu" and not cpus:
            continue
        folder = group.folders.get(controller)
        ok = folder is not None
        for filename, value in writes:
            if not ok:
                break
            try:
                (folder / filename).write_text(value)
            except OSError:
                optional = filename in ("memory.swap.max", "memory.memsw.limit_in_bytes")  # no swap accounting
                ok = optional or False
        if not ok:
            group.folders.pop(controller, None)
            group.unenforced.append({"memory": "memory", "pids": "pids", "cpu": "cpus"}[controller])


def _is_unified(group: SandboxCgroup, controller: str) -> bool:
    folder = group.folders.get(controller)
    return folder is not None and not str(folder).startswith(str(ROOT / controller) + "/")


def owner_pid(name: str) -> int | None:
    """The pid in `prime-sbx-<pid>-<id>`, or None for a name prime did not make."""
    if not name.startswith(PREFIX):
        return None
    with contextlib.suppress(ValueError, IndexError):
        return int(name[len(PREFIX):].split("-", 1)[0])
    return None


def leftovers() -> list[Path]:
    """Sandbox cgroup folders whose owning process is gone (what a SIGKILL of prime leaves)."""
    found: list[Path] = []
    bases = [ROOT / (_own_path(None) or "/").lstrip("/")] + [ROOT / c / (_own_path(c) or "/").lstrip("/") for c in V1_CONTROLLERS]
    for base in dict.fromkeys(bases):
        with contextlib.suppress(OSError):
            for folder in base.iterdir():
                pid = owner_pid(folder.name)
                if pid is not None and folder.is_dir() and not _alive(pid):
                    found.append(folder)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_dead_owners() -> int:
    """Remove the sandbox cgroups of owners that are gone (their processes died with their owner's
    bwrap, so the folders are empty); returns how many were removed."""
    removed = 0
    for folder in leftovers():
        group = SandboxCgroup(folder.name, {"leftover": folder})
        group.remove()
        removed += not folder.exists()
    return removed
