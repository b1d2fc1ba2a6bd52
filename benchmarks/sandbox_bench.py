"""Sandbox speed, one table: start p50/p95 and exec round trip per provider, and math-python rollouts/s
against the scripted server with the old in-process worker (git history) and with each provider.

    .venv/bin/python benchmarks/sandbox_bench.py [--starts 20] [--rollouts 40] [--concurrency 8]

Providers that cannot run here are listed with the reason. Containers use the offline base image
(`prime sandbox image build` makes it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from prime_cli.sandbox import NAMES, SandboxSpec, get_provider  # noqa: E402


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(round(q * (len(ordered) - 1))), len(ordered) - 1)] if ordered else float("nan")


def unavailable(name: str) -> str | None:
    try:
        reason = get_provider(name).unavailable_reason()
    except ImportError as exc:
        return f"the {name} provider cannot be imported ({exc})"
    if reason is None and name in ("podman", "docker"):
        from prime_cli.sandbox.images import BASE_IMAGE, image_present

        if not image_present(name, BASE_IMAGE):
            reason = f"no {BASE_IMAGE} image: run `prime sandbox image build --engine {name}`"
    return reason


def spec_for(provider: str) -> SandboxSpec:
    image = None
    if provider in ("podman", "docker"):
        from prime_cli.sandbox.images import BASE_IMAGE

        image = BASE_IMAGE
    return SandboxSpec(image=image, memory_mb=512, pids=64, disk_mb=128)


async def start_and_exec(provider: str, starts: int, execs: int, concurrency: int) -> dict[str, float]:
    backend = get_provider(provider)
    spec = spec_for(provider)
    start_times: list[float] = []
    for _ in range(starts):
        began = time.perf_counter()
        sandbox = await backend.start(spec)
        start_times.append(time.perf_counter() - began)
        await sandbox.close()
    sandbox = await backend.start(spec)
    exec_times: list[float] = []
    for _ in range(execs):
        began = time.perf_counter()
        result = await sandbox.exec(["true"])
        exec_times.append(time.perf_counter() - began)
        assert result.exit_code == 0, result
    await sandbox.close()
    began = time.perf_counter()
    many = await asyncio.gather(*(backend.start(spec) for _ in range(concurrency)))
    parallel = time.perf_counter() - began
    await asyncio.gather(*(s.close() for s in many))
    return {"start_p50": quantile(start_times, 0.5), "start_p95": quantile(start_times, 0.95),
            "exec_p50": statistics.median(exec_times), "parallel": parallel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=16, help="sandboxes started at once")
    parser.add_argument("--rollouts", type=int, default=40, help="math-python rollouts per provider (0: skip)")
    args = parser.parse_args()

    print(f"{'provider':10} {'start p50':>10} {'start p95':>10} {'exec p50':>10} {args.concurrency:>3} at once")
    for name in NAMES:
        reason = unavailable(name)
        if reason is not None:
            print(f"{name:10} skipped: {reason}")
            continue
        row = asyncio.run(start_and_exec(name, args.starts, args.execs, args.concurrency))
        print(f"{name:10} {row['start_p50'] * 1000:8.1f}ms {row['start_p95'] * 1000:8.1f}ms "
              f"{row['exec_p50'] * 1000:8.2f}ms {row['parallel']:8.2f} s")
    if args.rollouts:
        from sandbox_rollouts import rollout_table

        rollout_table(args.rollouts, args.concurrency)


if __name__ == "__main__":
    main()
