"""Eval-harness throughput and `prime --help` start-up: prime against verifiers' vf-eval, in one run.

    .venv/bin/python benchmarks/eval_throughput.py [-n 200 -r 4 -c 32 --repeats 3 --null-examples 5 --json out.json]

Every tool evaluates the same reverse-text workload (the same system prompt and Faker sentences, one chat
call per rollout, LCS + format reward) against tests/support/scripted_server.py, which answers at once,
so what is measured is the harness: wall time, rollouts/s, CPU per rollout and peak RSS of the whole
process tree. The peers (benchmarks/eval_peers.py), one row each in the same table:

- vf-eval from verifiers 0.3.1, the newest release with the classic API;
- vf-eval from verifiers 0.4.0, the newest release (the v1 API; prime 0.18.0 no longer runs evals locally,
  so this is what users would pick instead), with an in-process one-call harness at -n x -r, and with
  its `null` harness as users run it (one Python program per rollout, 1-2.5 s CPU each) at the smaller
  --null-examples x -r, beside a prime row of that same size (0 skips both).

Each run must produce n x r rollouts, by the tool's own count (prime's summary, vf-eval 0.3.1's announced
total, the ok lines of vf-eval 0.4.0's traces.jsonl) and by the chat requests the server answered.
The peers (and PyPI's `prime` for start-up) live in cached venvs under benchmarks/, made on first use.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from eval_peers import (
    BENCH,
    KEY_VAR,
    ROOT,
    V1_FLAGS,
    VERIFIERS_SPEC,
    VERIFIERS_V1_SPEC,
    VF1_VENV,
    VF_VENV,
    check,
    ensure_venv,
    make_subreaper,
    sentence_digest,
    setup_vf1,
    timed,
    version_in,
    vf1_runner,
    vf_run,
)

PRIME = ROOT / ".venv" / "bin" / "prime"
PYPI_VENV, PRIME_PYPI_SPEC = BENCH / ".venv-prime-pypi", "prime==0.18.0"
ROW_ORDER = ("prime", "vf031", "vf040-inproc", "prime-small", "vf040-null")
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


class Tool(NamedTuple):
    label: str  # its row in the table
    run: Callable[..., dict]
    n: int  # examples; each gets args.rollouts rollouts
    baseline: str  # the prime row of the same size, for the ratios


def measured(tool: Tool, args, base: str, env: dict, server_pid: int, n: int, r: int) -> dict:
    """One run of `tool`, with the chat requests the server answered meanwhile (must be one per rollout)."""
    stats0 = get_json(f"{base}/bench/stats")
    res = tool.run(args, base, env, server_pid, n, r)
    stats1 = get_json(f"{base}/bench/stats")
    res.update(served=stats1["served"] - stats0["served"], server_cpu=stats1["cpu_s"] - stats0["cpu_s"])
    if res["served"] != n * r:
        raise RuntimeError(f"{tool.label}: the server answered {res['served']} chat requests for {n * r} rollouts")
    return res


def bench_evals(args, base: str, server: subprocess.Popen, tools: dict[str, Tool], notes: list[str]) -> dict:
    env = {**os.environ, KEY_VAR: "bench", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1"}
    r, warmed = args.rollouts, set()
    for name, tool in list(tools.items()):  # warm-up: byte-code caches, page cache; checks each tool works
        if tool.run in warmed:
            continue
        try:
            measured(tool, args, base, env, server.pid, 2, 1)
            warmed.add(tool.run)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            if name == "prime":
                raise
            del tools[name]
            notes.append(f"NOT MEASURED: {tool.label} failed its warm-up run: {exc}")
            print(notes[-1], flush=True)
    for name in [k for k, t in tools.items() if t.baseline == k != "prime"]:  # a prime row of another size
        if not any(t.baseline == name for k, t in tools.items() if k != name):  # is there only as a baseline
            del tools[name]
    runs: dict[str, list[dict]] = {name: [] for name in tools}
    for i in range(args.repeats):  # interleaved, so drift on the machine hits every tool alike
        for name, tool in tools.items():
            res = measured(tool, args, base, env, server.pid, tool.n, r)
            runs[name].append(res)
            print(f"  {tool.label} run {i + 1}: {res['wall']:.2f} s wall, {res['cpu']:.2f} s CPU, "
                  f"eval {res['eval_s']:.2f} s, peak RSS {res['rss_mb']:.0f} MB, {res['served']} requests served "
                  f"(server CPU {res['server_cpu']:.2f} s), reward {res['reward']}", flush=True)
    out = {}
    for name, rs in runs.items():
        med = lambda key, rs=rs: statistics.median(x[key] for x in rs)  # noqa: E731
        tool, rollouts = tools[name], tools[name].n * r
        out[name] = {"label": tool.label, "baseline": tool.baseline, "num_examples": tool.n, "rollouts": rollouts,
                     "wall_s": med("wall"), "cpu_s": med("cpu"), "eval_s": med("eval_s"), "rss_mb": med("rss_mb"),
                     "reward": med("reward"),
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
    parser.add_argument("--null-examples", type=int, default=5, metavar="N",
                        help="examples for the vf-eval 0.4.0 null-harness row (1-2.5 s CPU per rollout); 0 skips it")
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
    n, notes = args.num_examples, []
    mine = sentence_digest(ROOT / ".venv" / "bin" / "python", "reverse_text", f"m.generated_sentences({n}, 1_000_003, 2, 5)")
    tools = {"prime": Tool(f"prime {versions['prime']}", prime_run, n, "prime")}

    def classic_rows(v: str) -> dict[str, Tool]:
        return {"vf031": Tool(f"vf-eval {v} (classic API)", vf_run, n, "prime")}

    def v1_rows(v: str) -> dict[str, Tool]:
        rows = {"vf040-inproc": Tool(f"vf-eval {v}, in-process harness (a)", vf1_runner("vf1-inproc-chat"), n, "prime")}
        if args.null_examples > 0:
            small = args.null_examples
            rows["prime-small"] = Tool(f"prime {versions['prime']} (null-row size)", prime_run, small, "prime-small")
            rows["vf040-null"] = Tool(f"vf-eval {v}, null harness (b)", vf1_runner("null"), small, "prime-small")
        return rows

    peers = [  # (key, verifiers spec, venv, set-up, env module, rows)
        ("verifiers (classic API)", VERIFIERS_SPEC, VF_VENV,
         lambda: ensure_venv(VF_VENV, [VERIFIERS_SPEC, *faker_pin, "-e", str(BENCH / "vf_reverse_text")]),
         "vf_reverse_text", classic_rows),
        ("verifiers (v1 API)", VERIFIERS_V1_SPEC, VF1_VENV, lambda: setup_vf1(faker_pin), "vf1_reverse_text", v1_rows),
    ]
    for key, spec, venv, setup, module, rows in peers:
        try:
            setup()
            versions[key] = version_in(venv, "verifiers")
            same = sentence_digest(venv / "bin" / "python", module, f"m.sentences({n}, 1_000_003)") == mine
            notes.append(f"identical prompts for prime and {key}: {'yes' if same else 'NO'}")
            tools.update(rows(versions[key]))
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            notes.append(f"NOT MEASURED: could not set up {spec}: {exc}")
            print(notes[-1], flush=True)
    if (VF1_VENV / "bin" / "uv").exists():
        versions["uv"] = version_in(VF1_VENV, "uv")
    tools = dict(sorted(tools.items(), key=lambda kv: ROW_ORDER.index(kv[0])))
    server, base = start_server()
    print(f"scripted server on {base}; {', '.join(f'{k} {v}' for k, v in versions.items())}; "
          f"-n {n} -r {args.rollouts} -c {args.concurrency} (null harness -n {args.null_examples}), "
          f"{args.repeats} repeats", flush=True)
    try:
        evals = bench_evals(args, base, server, tools, notes)
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
    cols = [  # (header, width, cell)
        ("n x r", 7, lambda e: f"{e['num_examples']}x{args.rollouts}"),
        ("wall s", 7, lambda e: f"{e['wall_s']:.2f}"),
        ("roll/s eval", 11, lambda e: f"{e['rollouts_per_s_eval']:.1f}"),
        ("roll/s proc", 11, lambda e: f"{e['rollouts_per_s_process']:.1f}"),
        ("CPU ms/roll", 11, lambda e: f"{e['cpu_ms_per_rollout']:.1f}"),
        ("peak RSS MB", 11, lambda e: f"{e['rss_mb']:.0f}"),
        ("x prime wall", 12, lambda e: ratio(e, evals[e["baseline"]], "wall_s")),
        ("x prime CPU", 11, lambda e: ratio(e, evals[e["baseline"]], "cpu_ms_per_rollout")),
    ]
    width = max(len(e["label"]) for e in evals.values())
    print(f"\n{'tool':<{width}} | " + " | ".join(f"{h:>{w}}" for h, w, _ in cols))
    print("-" * width + "-+-" + "-+-".join("-" * w for _, w, _ in cols))
    for e in evals.values():
        print(f"{e['label']:<{width}} | " + " | ".join(f"{cell(e):>{w}}" for _, w, cell in cols))
    print("\nx prime: the tool's wall time / prime's and its CPU per rollout / prime's, against the prime row of "
          "the same size; above 1 means prime is better.")
    print("roll/s eval: rollouts / the eval time each tool reports: prime = elapsed_s of its last progress event "
          "(rollouts only); vf-eval 0.3.1 = 'Evaluation completed in' (includes starting its env server); "
          "vf-eval 0.4.0 = first rollout start to last rollout end in its traces.jsonl. roll/s proc: rollouts / "
          "whole-process wall time.")
    print("CPU and peak RSS: the whole process tree (user+sys; RSS of its largest process): vf-eval 0.3.1 = "
          "vf-eval + env server + worker; vf-eval 0.4.0 = vf-eval with its in-process interception servers (+ for "
          "(b) one chat program per rollout).")
    if "vf040-inproc" in evals or "vf040-null" in evals:
        print(f"vf-eval 0.4.0 rows run {' '.join(V1_FLAGS)} (its defaults are a coding-agent harness in a remote "
              f"sandbox, and pushing results). (a) benchmarks/vf1_reverse_text/vf1_inproc_chat.py: one chat "
              f"request per rollout from inside vf-eval's process, through its interception server (verifiers "
              f"ships no such harness; its Harness.launch contract allows one).")
    if "vf040-null" in evals:
        print(f"(b) verifiers' own `null` harness for chat tasks, as users run it (--env.agent.harness.id null): "
              f"one streaming Python chat program per rollout, prepared with "
              f"`uv sync --script` at each start (a `uv lock --script` lockfile made once keeps that offline); "
              f"-n {args.null_examples} (--null-examples) as each rollout costs over a second of CPU, so it is compared "
              f"with prime at that size.")
    for e in evals.values():
        print(f"server during {e['label']}: {e['server_requests']} chat requests per run, {e['server_cpu_s']:.2f} s "
              f"server CPU = {100 * e['server_busy']:.0f}% of one core over the eval; mean reward {e['reward']:.3f}")
    print(f"\n{'`prime --help`':<36} | {'prime':>9} | {'PyPI ' + PRIME_PYPI_SPEC.split('==')[1]:>11} | ratio")
    print("-" * 36 + "-+-" + "-" * 9 + "-+-" + "-" * 11 + "-+------")
    for label, key in [("cold start ms (median of 10)", "help_ms"), ("CPU ms", "help_cpu_ms")]:
        mine, theirs = helps["prime"][key], helps.get("anchor", {}).get(key)
        shown = ("n/a", "-") if theirs is None else (f"{theirs:.2f}", f"{theirs / mine:.2f}x")
        print(f"{label:<36} | {mine:>9.2f} | {shown[0]:>11} | {shown[1]}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    for note in notes:
        print(note)
    if args.json:
        Path(args.json).write_text(json.dumps({"workload": vars(args), "evals": evals, "help": helps,
                                               "versions": versions, "notes": notes}, indent=2))
        print(f"wrote {args.json}")


def ratio(row: dict, base: dict, key: str) -> str:
    return "-" if row is base else f"{row[key] / base[key]:.2f}x"


if __name__ == "__main__":
    main()
