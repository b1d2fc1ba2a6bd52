"""The persistent Python REPL that `PythonEnv` runs inside a sandbox. Standard library only.

Copied into the sandbox and run by the sandbox's own Python. Two roles, one file:

  python -I repl.py serve CONFIG_JSON   bind the unix socket, check the packages, fork: the parent
                                         prints one JSON line ({"ok", "missing", "pid"}) and exits;
                                         the child (its own session, fds on /dev/null) serves calls
  python -I repl.py call SOCKET         read {"code", "cpu_seconds", "wall_seconds"} as JSON on stdin,
                                         send it, print the server's JSON reply; past the wall
                                         timeout kill the server's process group, print {"timeout": true}

The server keeps one namespace for the sandbox's life and runs each call like a notebook cell (a
final expression's value is printed), under a CPU timer (ITIMER_PROF). Output is captured in memory,
the first `max_output` bytes kept and the rest counted. It is not a security boundary: the sandbox
around it is (namespaces, cgroups). Its optional audit hook only gives a friendly early message
("starting processes is not available here") for code that tries; code that removes it gains
nothing the sandbox does not already allow.
"""

from __future__ import annotations

import ast
import io
import json
import linecache
import os
import signal
import socket
import sys
import traceback

BLOCKED = {  # the friendly refusals (`refuse_processes`): what the environment does not offer
    "os.fork": "starting processes", "os.forkpty": "starting processes", "os.posix_spawn": "starting processes",
    "os.spawn": "starting processes", "os.exec": "starting programs", "os.system": "starting programs",
    "subprocess.Popen": "starting programs", "os.kill": "sending signals", "os.killpg": "sending signals",
    "socket.connect": "network access", "socket.bind": "network access",
}


class CPUTimeExceeded(BaseException):
    """Raised in the model's code when one call uses up its CPU seconds (a BaseException, so
    `except Exception` in that code does not swallow it)."""


class CappedBuffer(io.TextIOBase):
    """A text stream that keeps the first `limit` bytes written during a call and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reset()

    def reset(self) -> None:
        self.kept, self.dropped = bytearray(), 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = str(text).encode("utf-8", "replace")
        room = max(self.limit - len(self.kept), 0)
        self.kept += data[:room]
        self.dropped += len(data) - min(len(data), room)
        return len(text)

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")


def user_traceback(exc: BaseException) -> str:
    """The exception with only the frames of the model's own code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell")]
    lines = traceback.format_list(frames) if frames else []
    head = "Traceback (most recent call last):\n" if lines else ""
    return head + "".join(lines) + "".join(traceback.format_exception_only(type(exc), exc))


def run_cell(code: str, namespace: dict, filename: str) -> None:
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


def friendly_hook(event: str, args: tuple) -> None:
    if event in BLOCKED:
        raise PermissionError(f"{BLOCKED[event]} is not available here ({event})")


def missing_modules(names: list[str]) -> list[str]:
    import importlib.util  # lazy: already loaded

    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def apply_memory_limit(memory_mb: int | None) -> None:
    if memory_mb:
        import resource  # lazy: start-up

        limit = memory_mb * 1024 * 1024
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def serve_forever(listener: socket.socket, cfg: dict) -> None:
    namespace: dict = {"__name__": "__main__"}
    buffer = CappedBuffer(int(cfg.get("max_output") or 8192))
    sys.stdout = sys.stderr = buffer
    sys.stdin = io.StringIO("")
    signal.signal(signal.SIGPROF, on_cpu_timer)
    if cfg.get("refuse_processes"):
        sys.addaudithook(friendly_hook)
    count = 0
    while True:
        conn, _ = listener.accept()
        with conn:
            request = json.loads(_read_all(conn) or b"{}")
            count += 1
            buffer.reset()
            error = None
            cpu = float(request.get("cpu_seconds") or 0)
            if cpu > 0:
                signal.setitimer(signal.ITIMER_PROF, cpu, 1.0)  # repeats if the code swallows it
            try:
                run_cell(request.get("code", ""), namespace, f"<cell {count}>")
            except CPUTimeExceeded:
                error = f"CPUTimeExceeded: the code used more than {cpu:g} s of CPU time"
            except BaseException as exc:  # the model's SystemExit, KeyboardInterrupt, MemoryError...
                error = user_traceback(exc)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            reply = {"output": buffer.text(), "error": error, "dropped": buffer.dropped}
            conn.sendall(json.dumps(reply).encode())


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def serve(cfg: dict) -> None:
    path = cfg["socket"]
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    missing = missing_modules(list(cfg.get("packages") or []))
    if missing:
        print(json.dumps({"ok": False, "missing": missing, "python": sys.executable}), flush=True)
        return
    pid = os.fork()
    if pid:
        print(json.dumps({"ok": True, "pid": pid, "python": sys.executable}), flush=True)
        return
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    with open(cfg["pid_file"], "w") as handle:
        handle.write(str(os.getpid()))
    sys.path.insert(0, os.getcwd())  # the model's own modules in the work folder import
    apply_memory_limit(cfg.get("memory_mb"))
    try:
        serve_forever(listener, cfg)
    finally:
        os._exit(0)


def call(path: str) -> None:
    request = json.loads(sys.stdin.read())
    wall = float(request.pop("wall_seconds", 0) or 0) or None
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
    except OSError:
        print(json.dumps({"dead": True}))
        return
    client.settimeout(wall)
    try:
        client.sendall(json.dumps(request).encode())
        client.shutdown(socket.SHUT_WR)
        reply = _read_all(client)
    except TimeoutError:
        kill_server(os.path.join(os.path.dirname(path), "server.pid"))
        print(json.dumps({"timeout": True}))
        return
    print(reply.decode() if reply else json.dumps({"dead": True}))


def kill_server(pid_file: str) -> None:
    try:
        with open(pid_file) as handle:
            pid = int(handle.read().strip())
        os.killpg(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(json.loads(sys.argv[2]))
    else:
        call(sys.argv[2])
