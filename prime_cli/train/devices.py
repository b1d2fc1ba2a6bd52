"""Which devices a run would use, found without torch, and the checks on the GPU settings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from .errors import TrainConfigError


def has_cuda() -> bool:
    """An NVIDIA driver is present (the check `make setup` also uses to pick vLLM's CUDA build)."""
    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def visible_gpu_count() -> int | None:
    """GPUs this process may use, when that can be told without torch (None when unknown)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() not in ("", "all"):
        return len([d for d in visible.split(",") if d.strip()])
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir():
        return len(list(gpus.iterdir())) or None
    return None


def is_multi_gpu(config: Any) -> bool:
    inference = config.inference
    gpus = set(config.inference_gpu_ids) | set(config.trainer_gpu_ids)
    return len(gpus) > 1 or inference.tensor_parallel_size * inference.data_parallel_size > 1


def shared_gpus(config: Any) -> list[int]:
    return sorted(set(config.inference_gpu_ids) & set(config.trainer_gpu_ids))


def check_devices(config: Any, cuda: bool) -> None:
    """GPU ids and parallel sizes agree (checked when the run would use GPUs)."""
    if not cuda and not is_multi_gpu(config):
        return
    inference = config.inference
    tp, dp = inference.tensor_parallel_size, inference.data_parallel_size
    ids = list(config.inference_gpu_ids)
    for key, values in (("inference_gpu_ids", ids), ("trainer_gpu_ids", list(config.trainer_gpu_ids))):
        if not values:
            raise TrainConfigError(f"{key} is empty: list at least one GPU, e.g. {key} = [0]")
        if len(set(values)) != len(values):
            raise TrainConfigError(f"{key} lists a GPU twice ({values}): list each GPU once")
        if any(v < 0 for v in values):
            raise TrainConfigError(f"{key} has a negative GPU id ({values})")
    if tp * dp != len(ids):  # (loading derives sizes that fit; this guards configs built otherwise)
        unset = [f"inference.{key}" for key in ("tensor_parallel_size", "data_parallel_size")
                 if key not in inference.model_fields_set]
        unset += ["inference_gpu_ids"] if "inference_gpu_ids" not in config.model_fields_set else []
        defaults = f"; {', '.join(unset)}: our default{'s' if len(unset) > 1 else ''}" if unset else ""
        raise TrainConfigError(
            f"inference.tensor_parallel_size x inference.data_parallel_size ({tp} x {dp} = {tp * dp}) must equal "
            f"the number of inference_gpu_ids (got {len(ids)}: {ids}{defaults}): list {tp * dp} GPUs or change "
            "the sizes")


def gpu_shortage(config: Any, gpu_count: int | None) -> str | None:
    """Why this machine cannot run the config's GPU layout (None when it can, or when unknown)."""
    if gpu_count is None:
        return None
    highest = max(list(config.inference_gpu_ids) + list(config.trainer_gpu_ids))
    if highest < gpu_count:
        return None
    plural = "s" if gpu_count != 1 else ""
    return (f"the config uses GPU {highest} but this machine shows {gpu_count} GPU{plural} "
            f"(ids 0..{gpu_count - 1}): change inference_gpu_ids / trainer_gpu_ids (or num_gpus)")
