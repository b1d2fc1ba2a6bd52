"""Data parallelism for the trainer under torchrun: each rank runs a share of the batch's micro-batches
and the LoRA gradients are summed across ranks before clipping, so every rank takes the identical
optimizer step. The base model is either sharded across the ranks (FSDP2, `sharded`, see fsdp.py:
FSDP sums the gradients) or held whole by each rank (the LoRA gradients are summed here).

One process (no torchrun) is the same code with a world of one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    sharded: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: list) -> list:
        return items[self.rank::self.world]

    def passes(self, items: list) -> list[tuple[Any, bool]]:
        """This rank's share of `items` as (item, counts). Sharded ranks must all run the same number of
        forward/backward passes (each one gathers weights with the others), so a rank with a smaller
        share repeats an item whose loss is not counted (weight 0)."""
        mine = [(item, True) for item in self.shard(items)]
        if not self.sharded or not items:
            return mine
        rounds = -(-len(items) // self.world)
        return mine + [(items[0], False)] * (rounds - len(mine))

    def sum_grads(self, params: list[torch.nn.Parameter]) -> None:
        if self.world == 1 or self.sharded:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        torch.distributed.all_reduce(flat)
        offset = 0
        for param, grad in zip(params, grads, strict=True):
            param.grad = flat[offset:offset + grad.numel()].view_as(grad).clone()
            offset += grad.numel()

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over the ranks, in place on its device (no host read)."""
        if self.world > 1:
            torch.distributed.all_reduce(tensor)
        return tensor

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()


def init_distributed(fsdp: bool = True) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return Dist(torch.distributed.get_rank(), world, sharded=fsdp)


def local_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")
