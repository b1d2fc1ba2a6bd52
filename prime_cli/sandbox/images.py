"""The offline base image: Debian bookworm with Python, sympy and numpy, built without a registry.

No image registry is reachable from the machines prime targets, so the image is made from a Debian
root filesystem that `mmdebstrap` builds from this machine's own apt sources (only the Debian mirror
is contacted), kept once as a gzip tarball in the user's cache, then `podman import`ed / `docker
import`ed under `BASE_IMAGE`. The same tarball, unpacked, is a root filesystem folder for bwrap's
`spec.image`. Building takes ~20-30 s the first time; afterwards importing takes a few seconds and an
image already present costs one `image inspect`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .bwrap import AGENT_PATH
from .spec import WORKDIR

BASE_IMAGE = "localhost/prime-sandbox-python:bookworm"
SUITE = "bookworm"
PACKAGES = ("python3", "python3-sympy", "python3-numpy", "coreutils")
TARBALL_NAME = f"prime-sandbox-python-{SUITE}.tar.gz"
ROOTFS_NAME = f"rootfs-{SUITE}"
APT_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))
ENGINE_HINTS = {"podman": "apt-get install podman runc", "docker": "apt-get install docker.io"}


class ImageError(RuntimeError):
    """The base image could not be built or imported; the message is one line saying why and what to do."""


def cache_dir() -> Path:
    """`PRIME_CACHE_DIR`, else `$XDG_CACHE_HOME/prime`, else `~/.cache/prime`; then sandbox-images/."""
    if os.environ.get("PRIME_CACHE_DIR"):
        base = Path(os.environ["PRIME_CACHE_DIR"]).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prime"
    return base / "sandbox-images"


def tarball_path() -> Path:
    return cache_dir() / TARBALL_NAME


def _progress(message: str) -> None:
    print(f"sandbox image: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time across processes (pytest workers, two prime runs)."""
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _mirror_args() -> list[str]:
    """The machine's own apt sources file (mmdebstrap reads deb822 and one-line files alike)."""
    for source in APT_SOURCES:
        if source.is_file() and source.stat().st_size:
            return [str(source)]
    return []


def build_tarball(progress: Callable[[str], None] = _progress) -> Path:
    """The root filesystem tarball, built once with mmdebstrap (needs root and the Debian mirror)."""
    target = tarball_path()
    if target.is_file():
        return target
    with _build_lock():
        if target.is_file():
            return target
        if shutil.which("mmdebstrap") is None:
            raise ImageError("mmdebstrap is not installed: install it with `apt-get install mmdebstrap` "
                             "(it builds the sandbox's Debian image from this machine's apt sources)")
        if os.geteuid() != 0:
            raise ImageError(f"building the sandbox image needs root (mmdebstrap --mode=root); run "
                             f"`sudo prime sandbox image build` once, or put a prebuilt {TARBALL_NAME} in {target.parent}")
        partial = target.with_name(target.name + ".partial.tar.gz")
        argv = ["mmdebstrap", "--variant=apt", f"--include={','.join(PACKAGES)}", "--mode=root", "--quiet",
                SUITE, str(partial), *_mirror_args()]
        progress(f"building Debian {SUITE} with {', '.join(PACKAGES)} (mmdebstrap, ~30 s, once) ...")
        began = time.monotonic()
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ImageError(f"mmdebstrap failed (exit {done.returncode}): {last}")
        partial.rename(target)
        size = target.stat().st_size / 1e6
        progress(f"built {target} ({size:.0f} MB) in {time.monotonic() - began:.1f} s")
        return target


def image_present(engine: str, tag: str = BASE_IMAGE) -> bool:
    """Whether `engine` (podman or docker) has the image `tag` locally."""
    if shutil.which(engine) is None:
        return False
    try:
        done = subprocess.run([engine, "image", "inspect", "--format", "{{.Id}}", tag],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def ensure_base_image(engine: str, progress: Callable[[str], None] = _progress) -> str:
    """`BASE_IMAGE` in `engine`: built (once) and imported when missing. Returns the tag."""
    if engine not in ENGINE_HINTS:
        raise ImageError(f"unknown container engine {engine!r}: pick podman or docker")
    if shutil.which(engine) is None:
        raise ImageError(f"{engine} is not installed: install it with `{ENGINE_HINTS[engine]}`")
    if image_present(engine):
        return BASE_IMAGE
    tarball = build_tarball(progress)
    progress(f"importing {tarball.name} into {engine} as {BASE_IMAGE} ...")
    began = time.monotonic()
    argv = [engine, "import", "--change", "CMD [\"/bin/sh\"]", str(tarball), BASE_IMAGE]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ImageError(f"{engine} import failed (exit {done.returncode}): {last}")
    progress(f"imported into {engine} in {time.monotonic() - began:.1f} s")
    return BASE_IMAGE


SANDBOX_UID = 65534  # every command of a container sandbox runs as this uid (containers.py)


def build_image(engine: str, context: Path, tag: str, writable: list[str], progress: Callable[[str], None] = _progress,
                timeout_s: float = 600.0) -> str:
    """`tag`, built from `context`/Dockerfile with `engine` (once: a present tag is kept, so make the tag from
    the context's content), then a layer that hands `writable` and the image's WORKDIR (created when missing)
    to the sandbox's uid, so the task's commands can edit the files the Dockerfile put there. Returns the tag."""
    if image_present(engine, tag):
        return tag
    base = f"{tag}-base"
    began = time.monotonic()
    progress(f"building {tag} from {context}/Dockerfile with {engine} ...")
    _build(engine, [engine, "build", "-t", base, "-f", str(context / "Dockerfile"), str(context)], None, timeout_s,
           f"{context}/Dockerfile")
    paths = " ".join(shlex.quote(p) for p in dict.fromkeys([*writable, *filter(None, [image_workdir(engine, base)])]))
    owned = f"FROM {base}\nUSER root\nRUN mkdir -p {paths} && chown -R {SANDBOX_UID}:{SANDBOX_UID} {paths}\n"
    _build(engine, [engine, "build", "-t", tag, "-f", "-", str(context)], owned, timeout_s, "its ownership layer")
    progress(f"built {tag} in {time.monotonic() - began:.1f} s")
    return tag


def _build(engine: str, argv: list[str], stdin: str | None, timeout_s: float, what: str) -> None:
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ImageError(f"{engine} build of {what} did not finish in {timeout_s:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        raise ImageError(f"{engine} build of {what} failed (exit {done.returncode}): {last}")


def image_workdir(engine: str, tag: str) -> str | None:
    """The image's WORKDIR, None when it sets none."""
    done = subprocess.run([engine, "image", "inspect", "--format", "{{.Config.WorkingDir}}", tag],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or None if done.returncode == 0 else None


def _unpackable(members: list[tarfile.TarInfo]) -> Iterator[tarfile.TarInfo]:
    """Everything but device nodes and fifos (bwrap gives the sandbox its own /dev)."""
    for member in members:
        if not (member.ischr() or member.isblk() or member.isfifo()):
            yield member


def ensure_base_rootfs(progress: Callable[[str], None] = _progress) -> Path:
    """The base image unpacked as a folder, for bwrap's `spec.image` (read-only inside the sandbox)."""
    folder = cache_dir() / ROOTFS_NAME
    if (folder / "usr" / "bin" / "python3").exists():
        return folder
    tarball = build_tarball(progress)
    with _build_lock():
        if (folder / "usr" / "bin" / "python3").exists():
            return folder
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        progress(f"unpacking {tarball.name} into {folder} ...")
        with tarfile.open(tarball) as archive:
            archive.extractall(partial, members=_unpackable(archive.getmembers()), filter="tar")
        partial.chmod(0o755)
        # bwrap mounts onto a read-only / only where the mount point already exists
        for mount_point in (WORKDIR, os.path.dirname(AGENT_PATH)):
            (partial / mount_point.lstrip("/")).mkdir(mode=0o755, exist_ok=True)
        (partial / AGENT_PATH.lstrip("/")).touch(mode=0o644)
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    return folder
