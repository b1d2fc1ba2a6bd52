"""Make this machine ready for the sandbox tests (`make test` runs it first); idempotent and quick.

As root (CI): installs what is missing with `apt-get install -y` (bubblewrap, podman, runc, mmdebstrap,
docker.io without its recommends; `apt-get update` only when an install fails), writes the podman
settings this machine kind needs to /etc/containers/containers.conf when that file does not exist
(never over a user's), and builds the offline base image once and imports it into podman (and into
docker when its daemon answers; tests/sandbox/conftest.py starts dockerd for the session and imports
it there otherwise).
As a normal user: installs nothing; prints what is missing and how to get it. Always exits 0: a
provider that cannot run is skipped by the tests, with the reason.

Also importable: tests/sandbox/conftest.py uses `start_dockerd` / `stop_dockerd`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# command -> Debian package (and its apt-get flags)
NEEDED = {
    "bwrap": ("bubblewrap", []),
    "podman": ("podman", []),
    "runc": ("runc", []),
    "mmdebstrap": ("mmdebstrap", []),
    "dockerd": ("docker.io", ["--no-install-recommends"]),
}
CONTAINERS_CONF = Path("/etc/containers/containers.conf")
# measured on Debian 12 VMs without systemd and with hybrid cgroups (see shared/DESIGN.md, "Sandboxes"):
# podman's default ulimits are above root's hard limits, crun refuses hybrid cgroups, no journald
CONTAINERS_CONF_TEXT = """\
# written by prime's scripts/sandbox_setup.py because this file did not exist
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
DOCKERD_LOG = Path("/tmp/prime-dockerd.log")


def say(message: str) -> None:
    print(f"sandbox setup: {message}", flush=True)


def missing_packages() -> dict[str, list[str]]:
    return {package: flags for command, (package, flags) in NEEDED.items() if shutil.which(command) is None
            and not Path(f"/usr/sbin/{command}").exists() and not Path(f"/usr/bin/{command}").exists()}


def apt_install(packages: dict[str, list[str]]) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    ok = True
    for flags in sorted({tuple(f) for f in packages.values()}):
        names = [p for p, f in packages.items() if tuple(f) == flags]
        argv = ["apt-get", "install", "-y", "-q", *flags, *names]
        say(" ".join(argv))
        if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            say("apt-get install failed; running apt-get update and trying again")
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
            ok = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL).returncode == 0 and ok
    return ok


def write_containers_conf() -> None:
    if CONTAINERS_CONF.exists() or shutil.which("podman") is None:
        return
    CONTAINERS_CONF.parent.mkdir(parents=True, exist_ok=True)
    CONTAINERS_CONF.write_text(CONTAINERS_CONF_TEXT)
    say(f"wrote {CONTAINERS_CONF} (runc, cgroupfs, file events, ulimits within root's hard limits)")


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def start_dockerd(timeout_s: float = 30.0) -> subprocess.Popen | None:
    """Start dockerd when root, installed and not already answering; the process to stop later, or None."""
    if docker_answers() or os.geteuid() != 0 or shutil.which("dockerd") is None or os.environ.get("DOCKER_HOST"):
        return None
    log = open(DOCKERD_LOG, "ab")
    process = subprocess.Popen(["dockerd"], stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if docker_answers():
            return process
        time.sleep(0.3)
    stop_dockerd(process)
    say(f"dockerd did not come up within {timeout_s:.0f} s; see {DOCKERD_LOG}")
    return None


def stop_dockerd(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def build_images() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from prime_cli.sandbox.images import ImageError, ensure_base_image

    engines = [e for e in ("podman", "docker") if shutil.which(e) and (e == "podman" or docker_answers())]
    for engine in engines:
        try:
            ensure_base_image(engine)
        except ImageError as exc:
            say(f"{engine}: {exc}")


def main() -> int:
    missing = missing_packages()
    if missing and os.geteuid() == 0:
        apt_install(missing)
        missing = missing_packages()
    if missing:
        names = " ".join(sorted(missing))
        say(f"missing {names}: the sandbox tests for them are skipped. Install them with "
            f"`sudo apt-get install {names}` (docker.io with --no-install-recommends)")
    if os.geteuid() == 0:
        write_containers_conf()
        build_images()
    elif not CONTAINERS_CONF.exists() and shutil.which("podman"):
        say(f"no {CONTAINERS_CONF}: if podman fails to start containers here, see scripts/sandbox_setup.py "
            "for the settings (runc, cgroupfs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
