"""AdamW over the LoRA parameters and the configured learning-rate schedule."""

from __future__ import annotations

import math

import torch

from prime_cli.train.plugin_api import RLConfig


def build_optimizer(params: list[torch.nn.Parameter], config: RLConfig) -> torch.optim.Optimizer:
    optim = config.trainer.optim
    return torch.optim.AdamW(params, lr=optim.lr, weight_decay=optim.weight_decay, betas=(optim.betas1, optim.betas2))


def lr_factor(step: int, config: RLConfig) -> float:
    """Multiplier of the base lr for optimizer step `step` (0-based)."""
    sched, base = config.trainer.scheduler, config.trainer.optim.lr
    if sched.warmup_steps and step < sched.warmup_steps:
        return (step + 1) / sched.warmup_steps
    if sched.type == "constant":
        return 1.0
    span = max(1, config.max_steps - sched.warmup_steps)
    progress = min(1.0, (step - sched.warmup_steps) / span)
    floor = sched.min_lr / base
    if sched.type == "linear":
        return floor + (1 - floor) * (1 - progress)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def build_scheduler(optimizer: torch.optim.Optimizer, config: RLConfig) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, config))


def apply_optim_config(optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LambdaLR,
                       config: RLConfig) -> None:
    """After a checkpoint is loaded: the config's lr, betas and weight decay replace the saved ones (a
    resume may change them; loading restores the old values), the schedule continuing where it was."""
    optim = config.trainer.optim
    scheduler.base_lrs = [optim.lr] * len(optimizer.param_groups)
    for group in optimizer.param_groups:
        group.update(initial_lr=optim.lr, lr=optim.lr * lr_factor(scheduler.last_epoch, config),
                     betas=(optim.betas1, optim.betas2), weight_decay=optim.weight_decay)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
