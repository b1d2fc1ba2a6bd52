"""The `bwrap` provider: bubblewrap namespaces + a cgroup per sandbox, no daemon, no image needed.

What the sandbox sees:
- read-only: /usr (with the /bin, /lib, /lib64 links), a short list of /etc files (no shadow, no
  keys), and the running Python (its prefix, its base prefix: the packages the environment has);
  or, with `spec.image` naming a folder, that unpacked root filesystem as / (read-only);
- private and sized (`--size` tmpfs, so the disk limit is the kernel's): /work and /tmp;
- a new /proc of its own pid namespace (the host's processes are invisible), a minimal /dev,
  no network (a new, empty network namespace), no /root, no home, no project or data folder;
- as root, the processes run as uid/gid 65534 with every capability dropped (setpriv inside the
  namespaces, after bwrap has mounted them); as a normal user, as that user in a user namespace.
- `--die-with-parent`: when prime dies, even by SIGKILL, the whole pid namespace dies with it.
Memory, pids and CPU come from the cgroup (cgroups.py); where it cannot be made the missing limits
are listed in `unenforced`, and `describe_enforcement` says so.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from . import cgroups
from .agent_channel import AGENT_SOURCE, AgentSandbox
from .base import SandboxProvider
from .spec import WORKDIR, SandboxError, SandboxSpec

NOBODY = 65534
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
             "localtime", "nsswitch.conf", "mime.types", "os-release", "debian_version")
AGENT_PATH = "/.prime/agent.py"
INSTALL_HINT = "bubblewrap is not installed: install it with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap`, or pick another provider with --sandbox podman|docker"


def python_binds() -> list[str]:
    """Folders the running interpreter needs: its prefix, base prefix and where the binary really lives."""
    folders = {sys.prefix, sys.base_prefix, str(Path(os.path.realpath(sys.executable)).parent.parent)}
    keep = [f for f in sorted(folders) if f and os.path.isdir(f) and f != "/" and not f.startswith("/usr/")]
    return [f for f in keep if not any(f != other and f.startswith(other + "/") for other in keep)]


def bind_with_parents(folders: list[str]) -> list[str]:
    """Read-only binds, their parent folders made first as 0755 (bwrap would make them 0700, which
    the sandbox's uid 65534 could not pass through)."""
    args: list[str] = []
    made: set[str] = set()
    for folder in folders:
        parents = Path(folder).parents
        for parent in reversed(list(parents)[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", folder, folder]
    return args


class BwrapSandbox(AgentSandbox):
    provider = "bwrap"
    workdir = WORKDIR

    def __init__(self, spec: SandboxSpec) -> None:
        super().__init__(spec)
        self.cgroup: cgroups.SandboxCgroup | None = None

    async def start(self, bwrap: str) -> None:
        spec = self.spec
        self.cgroup = cgroups.create(f"{cgroups.PREFIX}{os.getpid()}-{self.id}", spec.cpus, spec.memory_mb, spec.pids)
        self.unenforced = tuple(self.cgroup.unenforced)
        argv = [*self.cgroup.join_command(), bwrap, *self.bwrap_args(), *self.inner_command()]
        await self._launch(argv, env={"PATH": "/usr/bin:/bin"})

    def bwrap_args(self) -> list[str]:
        spec = self.spec
        root = os.geteuid() == 0
        args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if not spec.network:
            args.append("--unshare-net")
        if not root:
            args += ["--unshare-user", "--cap-drop", "ALL"]
        if spec.image:
            image = Path(spec.image)
            if not (image / "usr").is_dir():
                raise SandboxError(f"bwrap image {spec.image} is not an unpacked root filesystem (no usr/ inside)")
            args += ["--ro-bind", str(image), "/"]
        else:
            args += ["--ro-bind", "/usr", "/usr"]
            for link in ("bin", "sbin", "lib", "lib64", "lib32"):
                target = Path("/") / link
                if target.is_symlink():
                    args += ["--symlink", os.readlink(target), f"/{link}"]
                elif target.is_dir():
                    args += ["--ro-bind", str(target), f"/{link}"]
            args += ["--perms", "0755", "--dir", "/etc"]  # bwrap would make it 0700: unreadable for uid 65534
            for name in ETC_FILES:
                if os.path.exists(f"/etc/{name}"):
                    args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        python_args = bind_with_parents(python_binds()) if spec.python and not spec.image else []
        # the disk limit is shared out: half to /sandbox, the rest to /tmp and a small /dev/shm
        total = max(spec.disk_mb, 4) * 1024 * 1024
        shm = min(total // 8, 64 * 1024 * 1024)
        half = total // 2
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(half - shm), "--tmpfs", "/tmp",
                 "--perms", "0777", "--size", str(total - half), "--tmpfs", WORKDIR,
                 "--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm",
                 "--perms", "0755", "--dir", "/.prime", "--ro-bind", str(AGENT_SOURCE), AGENT_PATH,
                 *python_args,
                 "--chdir", WORKDIR, "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
                 "--setenv", "HOME", WORKDIR, "--setenv", "LANG", "C.UTF-8",
                 # bwrap's own / and /dev are unsized tmpfs, owned by the caller in a user namespace:
                 # read-only once everything is mounted, so /sandbox and /tmp (sized) are all that is writable
                 "--remount-ro", "/dev", "--remount-ro", "/"]
        return args

    def inner_command(self) -> list[str]:
        python = "/usr/bin/python3" if self.spec.image or not self.spec.python else sys.executable
        agent = [python, "-I", "-S", AGENT_PATH]
        if os.geteuid() != 0:
            return agent
        # root: mounts are made; now become nobody with no capabilities and no way back
        return ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", *agent]

    async def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()


class BwrapProvider(SandboxProvider):
    name = "bwrap"
    _pruned = False  # the first start in a process removes what SIGKILLed owners left (empty cgroups)

    def unavailable_reason(self) -> str | None:
        if not sys.platform.startswith("linux"):
            return "bubblewrap runs on Linux only; use --sandbox podman|docker"
        if shutil.which("bwrap") is None:
            return INSTALL_HINT
        if os.geteuid() == 0 and not os.path.exists("/usr/bin/setpriv"):
            return "setpriv (util-linux) is missing: install it with `apt-get install util-linux`"
        return None

    async def _start(self, spec: SandboxSpec) -> BwrapSandbox:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError(INSTALL_HINT)
        if not BwrapProvider._pruned:
            BwrapProvider._pruned = True
            cgroups.remove_dead_owners()
        sandbox = BwrapSandbox(spec)
        try:
            await sandbox.start(bwrap)
        except BaseException:
            await sandbox.close()
            raise
        return sandbox
