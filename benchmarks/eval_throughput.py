"""Eval-harness throughput and `prime --help` start-up: prime against verifiers' vf-eval, in one run.

    .venv/bin/python benchmarks/eval_throughput.py [-n 200 -r 4 -c 32 --repeats 3 --json out.json]

Both tools evaluate the same reverse-text workload (the same system prompt and Faker sentences, one chat
call per rollout, LCS + format reward) against tests/support/scripted_server.py, which answers at once,
so what is measured is the harness: wall time, rollouts/s and CPU per rollout of the whole process tree.
The anchor (verifiers, and PyPI's `prime` for start-up) lives in cached venvs under benchmarks/.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
PRIME = ROOT / ".venv" / "bin" / "prime"
VF_VENV, PYPI_VENV = BENCH / ".venv-verifiers", BENCH / ".venv-prime-pypi"
# verifiers 0.4.0 (what an unpinned install resolves to) keeps only the v1 taskset API, without
# SingleTurnEnv/XMLParser or the classic vf-eval; 0.3.1 is the newest release that still has them.
VERIFIERS_SPEC, PRIME_PYPI_SPEC = "verifiers==0.3.1", "prime==0.18.0"
KEY_VAR = "BENCH_API_KEY"
# The repo's scripted server, started as its own `python -m tests.support.scripted_server` would be,
# plus GET /bench/stats (chat requests served, server CPU seconds) to show it is not the bottleneck.
SERVER_CODE = """
import sys, time
from tests.support import scripted_server as s
handle = s.ScriptedOpenAIServer._handle
def stats_or_handle(self, h):
    if h.path == "/bench/stats":
        served = len(self.requests_to("/v1/chat/completions"))
        return self._send(h, 200, {"served": served, "cpu_s": time.process_time()})
    return handle(self, h)
s.ScriptedOpenAIServer._handle = stats_or_handle
s.main(sys.argv[1:])
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str, timeout: float = 2.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER_CODE, "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            get_json(f"{base}/v1/models")
            return proc, base
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the scripted server did not answer GET /v1/models within 30 s")


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
            lines = [x for x in (done.stderr + done.stdout).splitlines() if x.strip() and "is ignored" not in x]
            step = "pip install" if "pip" in cmd else "python -m venv"
            raise RuntimeError(f"{step} failed: {lines[-1] if lines else f'exit {done.returncode}'}")
    stamp.write_text(want)
    return "installed"


def version_in(venv: Path, dist: str) -> str:
    code = f"from importlib.metadata import version; print(version({dist!r}))"
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True).stdout.strip()


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


def timed(cmd: list[str], cwd: Path, env: dict, server_pid: int, timeout: float = 900) -> dict:
    """Run `cmd` as a whole process: wall seconds, user+sys CPU seconds of it and its descendants, output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    reap_orphans(keep=server_pid)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rc": done.returncode, "wall": wall, "cpu": cpu, "out": done.stdout, "err": done.stderr}


def prime_run(args, base: str, env: dict, server_pid: int, n: int, r: int) -> dict:
    cmd = [str(PRIME), "eval", "run", "reverse-text", "-m", "m", "-b", f"{base}/v1", "-k", KEY_VAR,
           "-n", str(n), "-r", str(r), "-c", str(args.concurrency), "-a", json.dumps({"num_eval_examples": n}), "--json"]
    res = timed(cmd, ROOT, env, server_pid)
    events = [json.loads(x) for x in res["out"].splitlines() if x.startswith("{")]
    done = next((e for e in events if e.get("event") == "done"), {})
    progress = [e for e in events if e.get("event") == "progress"]
    summary = done.get("summary") or {}
    res.update(rollouts=summary.get("num_rollouts"), reward=summary.get("avg_reward"),
               eval_s=progress[-1]["elapsed_s"] if progress else None)
    return check(res, "prime", n * r)


def vf_run(args, base: str, env: dict, server_pid: int, n: int, r: int) -> dict:
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
    return check(res, "vf-eval", n * r)


def check(res: dict, tool: str, expected: int) -> dict:
    if res["rc"] != 0 or res["rollouts"] != expected:
        tail = "\n".join((res["err"] or res["out"]).splitlines()[-15:])
        raise RuntimeError(f"{tool} exited {res['rc']} with {res['rollouts']} rollouts (expected {expected}):\n{tail}")
    return res


def sentence_digest(python: Path, module: str, call: str) -> str:
    code = f"import hashlib, {module} as m; print(hashlib.sha256('\\n'.join({call}).encode()).hexdigest())"
    return subprocess.run([str(python), "-c", code], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def bench_evals(args, base: str, server: subprocess.Popen, anchor_ok: bool, notes: list[str]) -> dict:
    env = {**os.environ, KEY_VAR: "bench", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    n, r = args.num_examples, args.rollouts
    tools = {"prime": prime_run, **({"anchor": vf_run} if anchor_ok else {})}
    for name, run in list(tools.items()):  # warm-up: byte-code caches, page cache; checks each tool works
        try:
            run(args, base, env, server.pid, 2, 1)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            if name == "prime":
                raise
            del tools[name]
            notes.append(f"ANCHOR NOT MEASURED: vf-eval failed its warm-up run: {exc}")
            print(notes[-1], flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in tools}
    for i in range(args.repeats):  # interleaved, so drift on the machine hits both tools alike
        for name, run in tools.items():
            stats0 = get_json(f"{base}/bench/stats")
            res = run(args, base, env, server.pid, n, r)
            stats1 = get_json(f"{base}/bench/stats")
            res.update(served=stats1["served"] - stats0["served"], server_cpu=stats1["cpu_s"] - stats0["cpu_s"])
            runs[name].append(res)
            print(f"  {name} run {i + 1}: {res['wall']:.2f} s wall, {res['cpu']:.2f} s CPU, eval {res['eval_s']:.2f} s, "
                  f"{res['served']} requests served (server CPU {res['server_cpu']:.2f} s), reward {res['reward']}", flush=True)
    out = {}
    for name, rs in runs.items():
        med = lambda key, rs=rs: statistics.median(x[key] for x in rs)  # noqa: E731
        rollouts = n * r
        out[name] = {"wall_s": med("wall"), "cpu_s": med("cpu"), "eval_s": med("eval_s"),
                     "rollouts_per_s_eval": statistics.median(rollouts / x["eval_s"] for x in rs),
                     "rollouts_per_s_process": statistics.median(rollouts / x["wall"] for x in rs),
                     "cpu_ms_per_rollout": statistics.median(1000 * x["cpu"] / rollouts for x in rs),
                     "server_requests": med("served"), "server_cpu_s": med("server_cpu"),
                     "server_busy": statistics.median(x["server_cpu"] / x["eval_s"] for x in rs)}
    return out


def bench_help(exe: Path, times: int = 10) -> dict:
    subprocess.run([str(exe), "--help"], capture_output=True)  # warm the page cache and byte-code
    walls, cpus = [], []
    for _ in range(times):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([str(exe), "--help"], capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"{exe} --help exited {done.returncode}")
    return {"help_ms": 1000 * statistics.median(walls), "help_cpu_ms": 1000 * statistics.median(cpus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--num-examples", type=int, default=200)
    parser.add_argument("-r", "--rollouts", type=int, default=4)
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args()
    if not PRIME.exists():
        raise SystemExit(f"{PRIME} is missing: run `make setup` first")
    os.chdir(ROOT)
    make_subreaper()
    try:
        faker_pin = [f"faker=={metadata.version('faker')}"]  # the version prime's env uses: same sentences
    except metadata.PackageNotFoundError:
        faker_pin = ["faker"]
    versions = {"prime": metadata.version("prime-cli"), "python": sys.version.split()[0]}
    notes: list[str] = []
    anchor_ok = False
    try:
        ensure_venv(VF_VENV, [VERIFIERS_SPEC, *faker_pin, "-e", str(BENCH / "vf_reverse_text")])
        versions["verifiers"] = version_in(VF_VENV, "verifiers")
        same = sentence_digest(ROOT / ".venv" / "bin" / "python", "reverse_text", f"m.generated_sentences({args.num_examples}, 1_000_003, 2, 5)") \
            == sentence_digest(VF_VENV / "bin" / "python", "vf_reverse_text", f"m.sentences({args.num_examples}, 1_000_003)")
        notes.append(f"identical prompts on both sides: {'yes' if same else 'NO'}")
        anchor_ok = True
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        notes.append(f"ANCHOR NOT MEASURED: could not set up verifiers ({VERIFIERS_SPEC}): {exc}")
        print(notes[-1], flush=True)
    server, base = start_server()
    print(f"scripted server on {base}; prime {versions['prime']}, verifiers {versions.get('verifiers', '-')}; "
          f"-n {args.num_examples} -r {args.rollouts} -c {args.concurrency}, {args.repeats} repeats", flush=True)
    try:
        evals = bench_evals(args, base, server, anchor_ok, notes)
    finally:
        server.terminate()
        server.wait(timeout=10)
    helps = {"prime": bench_help(PRIME)}
    try:
        ensure_venv(PYPI_VENV, [PRIME_PYPI_SPEC])
        versions["prime (PyPI)"] = version_in(PYPI_VENV, "prime")
        helps["anchor"] = bench_help(PYPI_VENV / "bin" / "prime")
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        notes.append(f"`prime --help` ANCHOR NOT MEASURED: could not set up PyPI {PRIME_PYPI_SPEC}: {exc}")
    report(args, evals, helps, versions, notes)


def report(args, evals: dict, helps: dict, versions: dict, notes: list[str]) -> None:
    rows = [  # (label, source, key, higher is better)
        ("rollouts/s (eval time the tool reports)", evals, "rollouts_per_s_eval", True),
        ("rollouts/s (whole process wall)", evals, "rollouts_per_s_process", True),
        ("wall s, whole process", evals, "wall_s", False),
        ("harness CPU ms/rollout (user+sys, tree)", evals, "cpu_ms_per_rollout", False),
        ("`--help` cold start ms (median of 10)", helps, "help_ms", False),
        ("`--help` CPU ms", helps, "help_cpu_ms", False),
    ]
    print(f"\n{'metric':<42} | {'prime':>9} | {'anchor':>9} | ratio")
    print("-" * 42 + "-+-" + "-" * 9 + "-+-" + "-" * 9 + "-+------")
    for label, source, key, higher in rows:
        mine, theirs = source["prime"][key], source.get("anchor", {}).get(key)
        ratio = "-" if theirs is None else f"{(mine / theirs if higher else theirs / mine):.2f}x"
        anchor = "n/a" if theirs is None else f"{theirs:.2f}"
        print(f"{label:<42} | {mine:>9.2f} | {anchor:>9} | {ratio}")
    print("\nratio: prime/anchor for rollouts/s, anchor/prime for times; above 1 means prime is better.")
    print("anchors: eval = verifiers' vf-eval (process tree: vf-eval + env server + worker), "
          "`--help` = the PyPI `prime` CLI.")
    print("eval time reported: prime = elapsed_s of its last progress event (rollouts only); "
          "vf-eval = 'Evaluation completed in' (includes starting its env server).")
    for name, e in evals.items():
        print(f"server during {name}: {e['server_requests']} chat requests per run, "
              f"{e['server_cpu_s']:.2f} s server CPU = {100 * e['server_busy']:.0f}% of one core over the eval")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    for note in notes:
        print(note)
    if args.json:
        Path(args.json).write_text(json.dumps({"workload": vars(args), "evals": evals, "help": helps,
                                               "versions": versions, "notes": notes}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
