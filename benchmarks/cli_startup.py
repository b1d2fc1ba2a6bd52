"""How long `prime` takes to answer `--help`, `eval run --help` and `--version`, as a whole process.

    python benchmarks/cli_startup.py [-n 21] [--prime PATH]

Runs the installed console script (the one next to this interpreter unless --prime says otherwise)
N times per command after one warm-up run, and prints the median, min and max wall time and the
median CPU time (user + sys of the child, from the kernel's accounting). On a shared machine the wall
time moves with the load: quote the median, and compare two setups in the same session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = [["--help"], ["eval", "run", "--help"], ["--version"]]


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def time_once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of argv, output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU accounting, unlike proc.wait()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        stderr = subprocess.run(argv, capture_output=True, text=True).stderr.strip()
        fail(f"{' '.join(argv)} exited {proc.returncode}: {stderr[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(argv: list[str], runs: int) -> dict[str, float]:
    time_once(argv)  # warm-up: byte-code caches, page cache
    samples = [time_once(argv) for _ in range(runs)]
    walls = [wall for wall, _ in samples]
    return {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
            "cpu": statistics.median(cpu for _, cpu in samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=21, help="timed runs per command (default 21)")
    parser.add_argument("--prime", default=str(Path(sys.executable).parent / "prime"),
                        help="the prime console script to time (default: next to this interpreter)")
    args = parser.parse_args()
    if args.runs < 1:
        fail("-n must be at least 1")
    if not Path(args.prime).is_file():
        fail(f"{args.prime} does not exist; run `make setup` or pass --prime PATH")

    print(f"{args.prime}, {args.runs} runs each (wall seconds; cpu = median user+sys)")
    print(f"{'command':<24}{'median':>8}{'min':>8}{'max':>8}{'cpu':>8}")
    for command in COMMANDS:
        row = measure([args.prime, *command], args.runs)
        label = "prime " + " ".join(command)
        print(f"{label:<24}{row['median']:8.3f}{row['min']:8.3f}{row['max']:8.3f}{row['cpu']:8.3f}")


if __name__ == "__main__":
    main()
