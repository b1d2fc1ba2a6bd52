"""Which devices each part runs on: the GPU ids of the config when CUDA is there, else the CPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def has_cuda() -> bool:
    """CUDA present, decided without importing torch (the launcher stays light)."""
    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def part_env(gpu_ids: list[int], base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one part: its GPUs only, and unbuffered output for live logs."""
    env = dict(os.environ if base is None else base)
    env["PYTHONUNBUFFERED"] = "1"
    if has_cuda():
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_ids)
    return env
