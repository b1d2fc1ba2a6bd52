"""The verifiers peers of benchmarks/eval_throughput.py, and how a whole process tree is measured.

Each peer runs one release's `vf-eval` from a cached venv under benchmarks/, made on first use:

- verifiers 0.3.1 (.venv-verifiers): the classic API, vf_reverse_text/ as a SingleTurnEnv.
- verifiers 0.4.0 (.venv-verifiers-040): the newest release. It has only the verifiers.v1 API
  (vf1_reverse_text/ is the same task as a taskset) and its defaults do not fit a plain chat task (the
  `bash` coding-agent harness, the remote `prime` runtime, pushing results), so it runs with
  `--env.agent.runtime.type subprocess --no-push --no-rich` and one of two harnesses:
  `null`, what users get for a chat task (one Python chat program per rollout, which streams), or
  `vf1-inproc-chat` (vf1_reverse_text/vf1_inproc_chat.py), one request per rollout in vf-eval's own
  process through its interception server: the fair peer for harness overhead.

`python benchmarks/eval_peers.py --measure STATS -- CMD...` runs CMD as a child subreaper, reaps every
descendant and writes the wall seconds, user+sys CPU seconds and largest peak RSS of the tree to STATS.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
KEY_VAR = "BENCH_API_KEY"
VF_VENV, VF1_VENV = BENCH / ".venv-verifiers", BENCH / ".venv-verifiers-040"
# 0.3.1 is the newest release with the classic API (SingleTurnEnv, XMLParser, the classic vf-eval);
# 0.4.0, the newest of all, keeps only verifiers.v1.
VERIFIERS_SPEC, VERIFIERS_V1_SPEC = "verifiers==0.3.1", "verifiers==0.4.0"
V1_FLAGS = ["--env.agent.runtime.type", "subprocess", "--no-push", "--no-rich"]
# Writes the null harness's chat program where vf-eval 0.4.0's subprocess runtime keeps it
# (content-addressed, so the same path every run) and prints that path.
CHAT_SCRIPT_CODE = """
import hashlib
from pathlib import Path
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes.subprocess import SubprocessRuntime
data = CHAT_PROGRAM_SOURCE.encode()
path = Path(SubprocessRuntime.scripts_dir) / (hashlib.sha256(data).hexdigest() + ".py")
path.parent.mkdir(parents=True, exist_ok=True)
if not path.exists() or path.read_bytes() != data:
    path.write_bytes(data)
print(path)
"""


def last_line(done: subprocess.CompletedProcess) -> str:
    lines = [x for x in (done.stderr + done.stdout).splitlines() if x.strip() and "is ignored" not in x]
    return lines[-1] if lines else f"exit {done.returncode}"


def ensure_venv(path: Path, packages: list[str]) -> str:
    """Create `path` and pip-install `packages` unless a stamp says so already; errors name the cause."""
    stamp, want = path / ".bench-installed", "\n".join(packages)
    if stamp.exists() and stamp.read_text() == want:
        return "cached"
    print(f"installing {' '.join(packages)} into {path} (once) ...", flush=True)
    for cmd in ([sys.executable, "-m", "venv", "--clear", str(path)],
                [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages]):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            step = "pip install" if "pip" in cmd else "python -m venv"
            raise RuntimeError(f"{step} failed: {last_line(done)}")
    stamp.write_text(want)
    return "installed"


def version_in(venv: Path, dist: str) -> str:
    code = f"from importlib.metadata import version; print(version({dist!r}))"
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True).stdout.strip()


def setup_vf1(faker_pin: list[str]) -> str:
    """The verifiers 0.4.0 venv, and a lockfile for the null harness's chat program.

    At each start vf-eval 0.4.0 runs `uv sync --script` on that program; without a lockfile uv resolves
    its dependencies against the package index every time. `uv lock --script` once makes later syncs
    install from uv's cache. Returns the script's path."""
    ensure_venv(VF1_VENV, [VERIFIERS_V1_SPEC, *faker_pin, "uv", "-e", str(BENCH / "vf1_reverse_text")])
    done = subprocess.run([str(VF1_VENV / "bin" / "python"), "-c", CHAT_SCRIPT_CODE], capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"could not write the null harness's chat program: {last_line(done)}")
    script = done.stdout.strip().splitlines()[-1]
    if not Path(f"{script}.lock").exists():
        print(f"uv lock --script {script} (once) ...", flush=True)
        done = subprocess.run([str(VF1_VENV / "bin" / "uv"), "lock", "--script", script, "-q", "--no-config"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"uv lock --script failed: {last_line(done)}")
    return script


def make_subreaper() -> bool:
    """Orphaned grandchildren (vf-eval's env server workers) are re-parented to us, so RUSAGE_CHILDREN counts them."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_orphans(keep: int, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        kids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and int(stat.parent.name) != keep:
                kids.append(int(stat.parent.name))
        if not kids:
            return
        for pid in kids:
            if time.monotonic() > deadline:
                os.kill(pid, 9)
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.05)


def measure(stats: str, cmd: list[str]) -> int:
    """The --measure mode: run `cmd`, reap its whole tree, write {wall, cpu, rss_mb} to `stats`."""
    make_subreaper()
    start = time.perf_counter()
    code = subprocess.call(cmd)
    wall = time.perf_counter() - start
    reap_orphans(keep=0)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(stats).write_text(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                                       "rss_mb": usage.ru_maxrss / 1024}))
    return code


def timed(cmd: list[str], cwd: Path, env: dict, server_pid: int, timeout: float = 900) -> dict:
    """Run `cmd` as a whole process: wall seconds, user+sys CPU seconds of it and its descendants, the
    largest peak RSS among them (MB), its output."""
    fd, stats = tempfile.mkstemp(prefix="bench-stats-", suffix=".json")
    os.close(fd)
    try:
        done = subprocess.run([sys.executable, __file__, "--measure", stats, "--", *cmd], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
        reap_orphans(keep=server_pid)
        usage = json.loads(Path(stats).read_text() or "{}")
    finally:
        os.unlink(stats)
    return {"rc": done.returncode, "wall": usage.get("wall"), "cpu": usage.get("cpu"), "rss_mb": usage.get("rss_mb"),
            "out": done.stdout, "err": done.stderr}


def check(res: dict, tool: str, expected: int) -> dict:
    if res["rc"] != 0 or res["rollouts"] != expected or res["eval_s"] is None:
        tail = "\n".join((res["err"] or res["out"]).splitlines()[-15:])
        raise RuntimeError(f"{tool} exited {res['rc']} with {res['rollouts']} rollouts (expected {expected}):\n{tail}")
    return res


def sentence_digest(python: Path, module: str, call: str) -> str:
    code = f"import hashlib, {module} as m; print(hashlib.sha256('\\n'.join({call}).encode()).hexdigest())"
    return subprocess.run([str(python), "-c", code], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def vf_run(args, base: str, env: dict, server_pid: int, n: int, r: int) -> dict:
    """verifiers 0.3.1's vf-eval; rollouts = the total it announces (it saves no results by default)."""
    with tempfile.TemporaryDirectory(prefix="vf-bench-") as tmp:
        cmd = [str(VF_VENV / "bin" / "vf-eval"), "vf_reverse_text", "-m", "m", "-b", f"{base}/v1", "-k", KEY_VAR,
               "-n", str(n), "-r", str(r), "-c", str(args.concurrency), "-a", json.dumps({"num_examples": n}),
               "-o", tmp, "--disable-tui", "--abbreviated-summary"]
        res = timed(cmd, Path(tmp), env, server_pid)
    text = res["out"] + res["err"]
    total = re.search(r"Processing \d+ groups \((\d+) total rollouts\)", text)
    took = re.search(r"Evaluation completed in ([\d.]+) seconds", text)
    reward = re.search(r"^reward: avg - ([\d.]+)", text, re.M)
    res.update(rollouts=int(total.group(1)) if total else None, eval_s=float(took.group(1)) if took else None,
               reward=float(reward.group(1)) if reward else None)
    return check(res, "vf-eval 0.3.1", n * r)


def last_end(timing: dict) -> float:
    """The latest `end` anywhere in a trace's timing record (scoring is normally last)."""
    ends = [v for k, v in timing.items() if k == "end" and isinstance(v, (int, float))]
    return max([*ends, *(last_end(v) for v in timing.values() if isinstance(v, dict))], default=timing.get("start", 0.0))


def vf1_runner(harness: str):
    """verifiers 0.4.0's vf-eval with `harness`; rollouts = the ok episodes in the traces.jsonl it wrote,
    eval time = first rollout start to last rollout end in those traces."""

    def run(args, base: str, env: dict, server_pid: int, n: int, r: int) -> dict:
        with tempfile.TemporaryDirectory(prefix="vf1-bench-") as tmp:
            cmd = [str(VF1_VENV / "bin" / "vf-eval"), "vf1-reverse-text", "-m", "m", "--client.base-url", f"{base}/v1",
                   "--client.api-key-var", KEY_VAR, "--env.taskset.num-examples", str(n), "-n", str(n), "-r", str(r),
                   "-c", str(args.concurrency), "--env.agent.harness.id", harness, *V1_FLAGS,
                   "-o", tmp, "--run.dir", "bench"]
            # the null harness finds `uv` on PATH (else it installs one into ~/.local/bin)
            res = timed(cmd, Path(tmp), {**env, "PATH": f"{VF1_VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"},
                        server_pid)
            traces_file = Path(tmp) / "bench" / "traces.jsonl"
            lines = traces_file.read_text().splitlines() if traces_file.exists() else []
        episodes = [json.loads(line) for line in lines if line.strip()]
        traces = [t for e in episodes if e.get("ok") for t in e.get("traces", [])]
        rewards = [sum(x["score"] * x["weight"] for x in (t.get("rewards") or {}).values()) for t in traces]
        span = max(last_end(t["timing"]) for t in traces) - min(t["timing"]["start"] for t in traces) if traces else None
        res.update(rollouts=sum(1 for e in episodes if e.get("ok")), eval_s=span,
                   reward=statistics.mean(rewards) if rewards else None)
        return check(res, f"vf-eval 0.4.0 ({harness} harness)", n * r)

    return run


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[1] == "--measure" and sys.argv[3] == "--":
        sys.exit(measure(sys.argv[2], sys.argv[4:]))
    sys.exit(__doc__)
