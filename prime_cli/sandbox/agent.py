"""The process inside a bwrap (or unsandboxed) sandbox that runs commands for the host.

Standard library only: it is copied into the sandbox and run by the sandbox's own Python as
`python -I -S agent.py`. It reads one JSON request per line on stdin and answers one JSON line per
request on stdout, tagged with the request's id, so several commands run at once:

  {"id": 1, "op": "exec", "argv": [...], "input": b64, "cwd": ..., "env": {...}, "timeout": s, "max_output": n}
  {"id": 2, "op": "read", "path": ...}            {"id": 3, "op": "write", "path": ..., "data": b64, "mode": 420}

It is not a security boundary (the kernel's namespaces and cgroups around it are), but what it says
must be the truth, since a grader reads test results through it. So:
- its first input line is a fresh key from the host, read before any command runs; every reply line
  is `HMAC-SHA256(key, body) body`, and the host drops a line whose MAC is wrong. A process left in the
  sandbox can write to the pipe (bwrap's pid 1 holds it too, with the sandbox's uid in a user
  namespace) but cannot sign: the key is only in the agent's memory;
- it makes itself non-dumpable, so code of the same uid can neither ptrace it nor open its
  /proc/<pid>/fd or mem (that needs CAP_SYS_PTRACE, which nothing in the sandbox has);
- `{"op": "killall"}` kills every other process it can signal (kill(-1) spares itself and pid 1):
  what the model left running, before a grader's commands.
Code in the sandbox may still kill or stop it: the host then sees no answer, an infrastructure error.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import threading
import time

OUTPUT_GRACE_S = 0.05  # after the command exits, how long a background child may keep its output open
MAX_READ_BYTES = 64 * 1024 * 1024

_write_lock = threading.Lock()
_key = b""


def reply(message: dict) -> None:
    body = json.dumps(message).encode()
    line = hmac.new(_key, body, hashlib.sha256).hexdigest().encode() + b" " + body + b"\n"
    with _write_lock:
        os.write(1, line) if len(line) < 65536 else _write_all(line)


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


class CappedReader(threading.Thread):
    """Reads a pipe to its end, keeping the first `limit` bytes and counting the rest."""

    def __init__(self, stream, limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit = stream, limit
        self.kept, self.dropped = bytearray(), 0

    def run(self) -> None:
        fd = self.stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            room = max(self.limit - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += len(chunk) - min(len(chunk), room)


def run_command(request: dict) -> dict:
    env = request.get("env")
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            request["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=request.get("cwd") or None, env=env, start_new_session=True,
        )
    except OSError as exc:
        message = f"{request['argv'][0]}: {exc.strerror or exc}\n".encode()
        return {"exit_code": 127, "stdout": "", "stderr": base64.b64encode(message).decode()}
    _started_groups.add(proc.pid)
    limit = int(request.get("max_output") or 65536)
    readers = [CappedReader(proc.stdout, limit), CappedReader(proc.stderr, limit)]
    for reader in readers:
        reader.start()
    data = base64.b64decode(request.get("input") or "")
    feeder = threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True)
    feeder.start()
    timed_out = False
    try:
        proc.wait(timeout=request.get("timeout"))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        proc.wait()
    for reader in readers:
        reader.join(OUTPUT_GRACE_S if not timed_out else 1.0)
    out, err = readers
    return {
        "exit_code": None if timed_out else proc.returncode,
        "stdout": base64.b64encode(bytes(out.kept)).decode(), "stderr": base64.b64encode(bytes(err.kept)).decode(),
        "stdout_dropped": out.dropped, "stderr_dropped": err.dropped, "timed_out": timed_out,
        "duration_s": time.monotonic() - started,
    }


def _feed(stream, data: bytes) -> None:
    try:
        if data:
            stream.write(data)
        stream.close()
    except OSError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def read_file(request: dict) -> dict:
    with open(request["path"], "rb") as handle:
        data = handle.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise OSError(f"{request['path']} is larger than {MAX_READ_BYTES} bytes")
    return {"data": base64.b64encode(data).decode()}


def write_file(request: dict) -> dict:
    path = request["path"]
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(base64.b64decode(request["data"]))
    os.chmod(path, int(request.get("mode") or 0o644))
    return {}


_started_groups: set[int] = set()


def kill_all(request: dict) -> dict:
    if request.get("scope") == "started":  # unsandboxed: kill(-1) would reach every process of the user
        for group in list(_started_groups):
            _kill_group(group)
        for pid in _descendants(os.getpid()):  # daemons that left their group are still ours (subreaper)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return {}
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing else was running
    return {}


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue += children.get(pid, [])
    return found


def become_subreaper() -> None:
    """Orphans of our commands (a double-forked daemon) become our children, so killall finds them."""
    import ctypes  # lazy: start-up

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def make_undumpable() -> None:
    import ctypes  # lazy: start-up

    pr_set_dumpable = 4
    if ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


OPERATIONS = {"exec": run_command, "read": read_file, "write": write_file, "killall": kill_all}


def handle(request: dict) -> None:
    try:
        answer = OPERATIONS[request["op"]](request)
    except Exception as exc:  # reported to the host as this request's error, the agent goes on
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    reply({"id": request.get("id"), **answer})


def main() -> None:
    global _key
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    make_undumpable()
    become_subreaper()
    _key = bytes.fromhex(json.loads(sys.stdin.buffer.readline())["key"])
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # stray warnings never mix into the protocol
    reply({"id": 0, "ready": True, "uid": os.getuid(), "python": sys.version.split()[0]})
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        threading.Thread(target=handle, args=(request,), daemon=True).start()
    # the host closed our stdin: the sandbox is being closed


if __name__ == "__main__":
    main()
