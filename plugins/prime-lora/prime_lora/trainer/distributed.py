"""Data parallelism for the trainer under torchrun: each rank runs a share of the batch's micro-batches
on a full replica (the base model is frozen and LoRA parameters are small), and the LoRA gradients
are summed across ranks before clipping, so every rank takes the identical optimizer step.

One process (no torchrun) is the same code with a world of one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: list) -> list:
        return items[self.rank::self.world]

    def sum_grads(self, params: list[torch.nn.Parameter]) -> None:
        if self.world == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        torch.distributed.all_reduce(flat)
        offset = 0
        for param, grad in zip(params, grads, strict=True):
            param.grad = flat[offset:offset + grad.numel()].view_as(grad).clone()
            offset += grad.numel()

    def sum_floats(self, values: list[float], device: torch.device) -> list[float]:
        if self.world == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.float64, device=device)
        torch.distributed.all_reduce(tensor)
        return tensor.tolist()

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()


def init_distributed() -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return Dist(torch.distributed.get_rank(), world)


def local_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")
