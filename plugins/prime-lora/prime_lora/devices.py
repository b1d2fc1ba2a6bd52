"""Which devices each part runs on: the GPU ids of the config when CUDA is there, else CPU cores.

On a CPU-only machine vLLM and the trainer would otherwise both spread over every core; vLLM pins
its OpenMP threads, so the two oversubscribe the cores and each runs at a fraction of its speed
(measured on 2 cores: a step took gen + train ~50 s each instead of overlapping). Giving each part
its own cores lets generation of batch n+1 really overlap training on batch n.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TRAINER_CPUS_VAR = "PRIME_TRAINER_CPUS"


def has_cuda() -> bool:
    """CUDA present, decided without importing torch (the launcher stays light)."""
    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def cpu_split(cpus: list[int] | None = None) -> tuple[list[int], list[int]]:
    """(inference cores, trainer cores): halves, inference first; both get all cores on one core."""
    cpus = available_cpus() if cpus is None else cpus
    if len(cpus) < 2:
        return cpus, cpus
    half = len(cpus) // 2
    return cpus[:half], cpus[half:]


def cpu_list(cpus: list[int]) -> str:
    """"0-3" for a contiguous run (the form vLLM's thread binding reads), else "0,2,5"."""
    if len(cpus) > 1 and cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(str(c) for c in cpus)


def part_env(gpu_ids: list[int], base: dict[str, str] | None = None, cpus: list[int] | None = None,
             part: str = "") -> dict[str, str]:
    """The environment of one part: its GPUs (or, without CUDA, its CPU cores) and unbuffered output."""
    env = dict(os.environ if base is None else base)
    env["PYTHONUNBUFFERED"] = "1"
    if has_cuda():
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_ids)
    elif cpus:
        if part == "inference":
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_list(cpus)
        elif part == "trainer":
            env[TRAINER_CPUS_VAR] = ",".join(str(c) for c in cpus)
            env["OMP_NUM_THREADS"] = str(len(cpus))
    return env


def apply_trainer_cpus() -> list[int] | None:
    """In the trainer process: stay on the cores the launcher gave it (no-op when not set)."""
    value = os.environ.get(TRAINER_CPUS_VAR)
    if not value or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = [int(c) for c in value.split(",")]
    os.sched_setaffinity(0, cpus)
    import torch

    torch.set_num_threads(len(cpus))
    return cpus
