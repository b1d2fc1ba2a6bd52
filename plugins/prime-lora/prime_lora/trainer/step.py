"""One optimizer step on one batch: micro-batches with gradient accumulation, clipping, skip on non-finite."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from prime_cli.train.plugin_api import RLConfig

from .batches import loss_token_count, micro_batches
from .distributed import Dist
from .logprobs import LossPositionLogprobs
from .loss import policy_loss


@dataclass
class StepResult:
    loss: float
    mismatch_kl: float
    masked_fraction: float
    entropy: float
    grad_norm: float
    skipped: bool
    num_tokens: int  # loss tokens
    total_tokens: int  # every token the model ran on
    train_s: float

    def as_metrics(self) -> dict[str, Any]:
        def clean(value: float) -> float | None:  # JSON has no NaN
            return value if math.isfinite(value) else None

        return {"loss": clean(self.loss), "mismatch_kl": clean(self.mismatch_kl),
                "masked_fraction": self.masked_fraction, "entropy": clean(self.entropy),
                "grad_norm": clean(self.grad_norm), "skipped": self.skipped, "num_tokens": self.num_tokens,
                "tokens_per_s": self.total_tokens / self.train_s if self.train_s > 0 else 0.0,
                "train_s": self.train_s}


def clip_gradients(params: list[torch.nn.Parameter], max_norm: float) -> float:
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor when sharded


def train_step(model: Any, optimizer: Any, scheduler: Any, params: list[torch.nn.Parameter],
               samples: list[dict[str, Any]], config: RLConfig, device: torch.device, pad_id: int,
               dist: Dist = Dist()) -> StepResult:
    """`model`: the peft model, or LossPositionLogprobs around it (the FSDP root when sharded)."""
    started = time.perf_counter()
    if not isinstance(model, LossPositionLogprobs):
        model = LossPositionLogprobs(model)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total = loss_token_count(samples)
    loss_sum, kl_sum, masked, entropy_sum = 0.0, 0.0, 0, 0.0
    temperature = config.orchestrator.sampling.temperature
    grad_scale = dist.world if dist.sharded else 1  # FSDP averages over ranks; the batch's gradient is the sum
    # a shared prompt runs once per micro-batch, on a KV cache. Not with activation checkpointing (it
    # drops caches) nor when sharded (a cached pass runs the decoder twice, so ranks running different
    # kinds of passes would gather weights a different number of times)
    share = config.trainer.model.ac is None and not dist.sharded
    batches = micro_batches(samples, config.trainer.micro_batch_size, pad_id, device, share_prefix=share)
    passes = dist.passes(batches) if total else []
    for index, (mb, counts) in enumerate(passes):
        if mb.loss_tokens == 0 and not dist.sharded:
            continue
        if dist.sharded:  # reduce the gradients once, after the last pass
            model.set_requires_gradient_sync(index == len(passes) - 1)
        logp, entropy = model(mb.input_ids, mb.attention_mask, mb.loss_mask, temperature, mb.prefix_len)
        parts = policy_loss(logp, mb.inference_logprobs, mb.advantages, config.trainer.loss, total)
        if not counts:  # a pass that only keeps sharded ranks in step: no gradient, no metrics
            (parts.loss * 0.0).backward()
            continue
        (parts.loss * grad_scale).backward()
        loss_sum += parts.loss.item()
        kl_sum += parts.mismatch_kl_sum
        masked += parts.masked
        entropy_sum += entropy.sum().item()
    dist.sum_grads(params)
    loss_sum, kl_sum, masked, entropy_sum = dist.sum_floats([loss_sum, kl_sum, masked, entropy_sum], device)
    grad_norm = clip_gradients(params, config.trainer.optim.max_norm) if total else 0.0
    skipped = total == 0 or not (math.isfinite(loss_sum) and math.isfinite(grad_norm))
    if skipped:
        optimizer.zero_grad(set_to_none=True)
    else:
        optimizer.step()
    with warnings.catch_warnings():  # a skipped step still advances the schedule; torch warns about that
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()
    return StepResult(loss=loss_sum, mismatch_kl=kl_sum / max(total, 1), masked_fraction=int(masked) / max(total, 1),
                      entropy=entropy_sum / max(total, 1), grad_norm=grad_norm, skipped=skipped, num_tokens=total,
                      total_tokens=sum(len(s["input_ids"]) for s in samples),
                      train_s=time.perf_counter() - started)
