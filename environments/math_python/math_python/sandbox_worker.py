"""The child side of the math-python sandbox: a persistent Python interpreter behind limits.

Started by `sandbox.PythonSandbox` as `python -I -B sandbox_worker.py CONFIG_JSON` in a fresh
session (its own process group) inside a private temporary directory. Standard library only.
Before any model code runs it:
1. moves into a new network namespace when the kernel allows it (root, or unprivileged user
   namespaces): no interface but a down loopback, so the network is gone at the kernel level;
2. sets kernel resource limits: address space, total CPU time, file size, processes, open files,
   no core dumps;
3. installs an audit hook (PEP 578) that refuses process creation, signals to other processes,
   sockets, ctypes calls, raising limits, and any write, rename or delete outside its directory.
Then it reads one JSON request per line from REQUEST_FD, runs the code in one namespace kept for
the whole session, and answers one JSON line on RESPONSE_FD. The model's output goes to fd 1
(capped here, and again by the parent while it reads).
"""

from __future__ import annotations

import ast
import io
import json
import linecache
import os
import resource
import signal
import sys
import traceback

BLOCKED_EVENTS = {
    "os.fork": "starting processes",
    "os.forkpty": "starting processes",
    "os.posix_spawn": "starting processes",
    "os.spawn": "starting processes",
    "os.exec": "starting programs",
    "os.system": "starting programs",
    "subprocess.Popen": "starting programs",
    "os.kill": "sending signals",
    "os.killpg": "sending signals",
    "signal.pthread_kill": "sending signals",
    "ctypes.dlopen": "loading C libraries",
    "ctypes.dlsym": "calling C functions",
    "ctypes.call_function": "calling C functions",
    "resource.setrlimit": "changing resource limits",
    "resource.prlimit": "changing resource limits",
    "os.chroot": "changing the root directory",
}
PATH_EVENTS = {  # events whose path arguments must all lie inside the sandbox directory
    "os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.link", "os.symlink", "os.truncate",
    "os.chmod", "os.chown", "os.utime", "os.chflags", "os.lchflags", "os.mkfifo", "os.mknod",
    "os.setxattr", "os.removexattr", "shutil.rmtree", "shutil.copyfile", "shutil.copytree",
    "shutil.move", "shutil.chown",
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000


class CPUTimeExceeded(BaseException):
    """Raised in the model's code when one call uses up its CPU seconds (BaseException, so a
    plain `except Exception` in that code does not swallow it)."""


def isolate_network() -> bool:
    """Enter a new, empty network namespace; False when the kernel refuses (the audit hook stays)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if os.geteuid() == 0:
            return libc.unshare(CLONE_NEWNET) == 0
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            return False
        # map our own ids so that files we create keep a valid owner
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
        return True
    except Exception:
        return False


def apply_limits(cfg: dict) -> None:
    def cap(which: int, value: int, grace: int = 0) -> None:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value, grace = min(value, hard), 0
        resource.setrlimit(which, (value, value + grace))

    mib = 1024 * 1024
    cap(resource.RLIMIT_AS, cfg["memory_mb"] * mib)
    cap(resource.RLIMIT_CPU, cfg["session_cpu_seconds"], grace=1)  # SIGXCPU first, SIGKILL 1 s later
    cap(resource.RLIMIT_FSIZE, cfg["max_file_mb"] * mib)
    cap(resource.RLIMIT_NPROC, cfg["max_processes"])
    cap(resource.RLIMIT_NOFILE, cfg["max_open_files"])
    cap(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing us


def make_audit_hook(root: str):
    root = os.path.realpath(root)
    allowed_files = {os.devnull}

    def inside(path: object) -> bool:
        if isinstance(path, int):  # an already open descriptor
            return True
        try:
            resolved = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return resolved == root or resolved.startswith(root + os.sep) or resolved in allowed_files

    def hook(event: str, args: tuple) -> None:
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"sandbox: {BLOCKED_EVENTS[event]} is not allowed ({event})")
        if event.startswith("socket."):
            raise PermissionError(f"sandbox: network access is not allowed ({event})")
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            if writing and not inside(path):
                raise PermissionError(f"sandbox: writing {os.fsdecode(path)!r} is not allowed; write inside {root}")
        elif event in PATH_EVENTS:
            for arg in args:
                if isinstance(arg, (str, bytes, os.PathLike)) and not inside(arg):
                    raise PermissionError(f"sandbox: {event} on {os.fsdecode(arg)!r} is not allowed outside {root}")

    return hook


class CappedWriter(io.TextIOBase):
    """A text stream onto fd 1 that passes at most `limit` bytes per call and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit, self.written, self.dropped = limit, 0, 0

    def reset(self) -> None:
        self.written = self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = str(text).encode("utf-8", "replace")
        room = max(self.limit - self.written, 0)
        keep = data[:room]
        while keep:
            sent = os.write(1, keep)
            keep = keep[sent:]
        self.written += min(len(data), room)
        self.dropped += len(data) - min(len(data), room)
        return len(text)


def user_traceback(exc: BaseException) -> str:
    """The exception with only the frames of the model's own code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell")]
    lines = traceback.format_list(frames) if frames else []
    head = "Traceback (most recent call last):\n" if lines else ""
    return head + "".join(lines) + "".join(traceback.format_exception_only(type(exc), exc))


def execute(code: str, namespace: dict, filename: str) -> None:
    """Run `code` like a notebook cell: a final expression's value is printed."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
        if value is not None:
            print(repr(value))


def on_cpu_timer(signum, frame):
    raise CPUTimeExceeded("CPU time limit for one call exceeded")


def serve(cfg: dict, requests, responses) -> None:
    namespace: dict = {"__name__": "__main__"}
    writer = CappedWriter(cfg["max_output_bytes"])
    sys.stdout = sys.stderr = writer
    sys.stdin = io.StringIO("")
    signal.signal(signal.SIGPROF, on_cpu_timer)
    for count, line in enumerate(requests, start=1):
        code = json.loads(line)["code"]
        writer.reset()
        error = None
        signal.setitimer(signal.ITIMER_PROF, cfg["cpu_seconds"], 1.0)  # repeats if the code swallows it
        try:
            execute(code, namespace, f"<cell {count}>")
        except CPUTimeExceeded:
            error = f"CPUTimeExceeded: the code used more than {cfg['cpu_seconds']} s of CPU time"
        except BaseException as exc:  # the model's SystemExit, KeyboardInterrupt, MemoryError...
            error = user_traceback(exc)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        reply = {"ok": error is None, "error": error, "dropped": writer.dropped}
        responses.write(json.dumps(reply) + "\n")
        responses.flush()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    requests = os.fdopen(cfg["request_fd"], "r", encoding="utf-8")
    responses = os.fdopen(cfg["response_fd"], "w", encoding="utf-8")
    os.chdir(cfg["root"])
    isolated = isolate_network()
    apply_limits(cfg)
    sys.addaudithook(make_audit_hook(cfg["root"]))
    responses.write(json.dumps({"ready": True, "network_namespace": isolated}) + "\n")
    responses.flush()
    serve(cfg, requests, responses)


if __name__ == "__main__":
    main()
