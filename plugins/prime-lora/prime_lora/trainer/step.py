"""One optimizer step on one batch: micro-batches with gradient accumulation, clipping, and no step on a
non-finite loss or gradient (`skipped`) nor on a batch whose advantages are all zero (`zero_advantage`:
its gradient is zero, yet AdamW's momentum would still move the adapter). The learning-rate schedule
advances on every trainer step, stepped or not, so that it follows the step numbers. An SFT run
(`config.is_sft`) takes the same step with the cross-entropy loss (sft_loss.py) in place of the policy loss.

Metric sums stay on the device during the step and are read once at its end (step_sums.py: one host
sync rather than one per micro-batch); train_s ends after the device has finished.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from prime_cli.train.plugin_api import RLConfig

from .batches import MicroBatch, has_signal, loss_token_count
from .distributed import Dist
from .logprobs import LossPositionLogprobs
from .loss import policy_loss
from .packed_attention import supports_packing
from .packing import plan_micro_batches
from .sampling import SamplingTransform
from .sft_loss import SFT_SAMPLING, sft_loss
from .step_sums import StepSums

GIB = 2**30


@dataclass
class StepResult:
    loss: float
    mismatch_kl: float
    masked_fraction: float
    entropy: float
    grad_norm: float
    skipped: bool  # non-finite loss or gradient: no optimizer step
    num_tokens: int  # loss tokens (metrics.jsonl `num_tokens`)
    all_tokens: int  # every token of the batch's samples (tokens_per_s counts these)
    train_s: float
    zero_advantage: bool = False  # every advantage is 0: no optimizer step
    mismatch_kl_masked: float = 0.0  # mean k3 over the tokens masked by the ratio band
    mismatch_kl_unmasked: float = 0.0  # mean k3 over the tokens that trained
    masked_low_fraction: float = 0.0  # ratio < ratio_low
    masked_high_fraction: float = 0.0  # ratio > ratio_high
    forward_tokens: int = 0  # token positions the model ran: padding included, a shared prompt once
    peak_memory_bytes: int = 0  # the run's peak so far (the allocator's or the process's high-water mark), not this step's
    # an MoE's routing near-ties (routing.py): their share of the loss tokens, the share of those the ratio
    # band masked, their mean k3; None for a dense model
    routing: dict[str, float] | None = None
    sft: bool = False  # the SFT loss: loss is the mean negative log-likelihood, no RL-only metric

    def as_metrics(self) -> dict[str, Any]:
        def clean(value: float) -> float | None:  # JSON has no NaN
            return value if math.isfinite(value) else None

        def per_s(tokens: int) -> float:
            return tokens / self.train_s if self.train_s > 0 else 0.0

        if self.sft:
            return {"loss": clean(self.loss), "nll": clean(self.loss), "entropy": clean(self.entropy),
                    "grad_norm": clean(self.grad_norm), "skipped": self.skipped, "num_tokens": self.num_tokens,
                    "tokens_per_s": per_s(self.all_tokens), "forward_tokens": self.forward_tokens,
                    "forward_tokens_per_s": per_s(self.forward_tokens), "train_s": self.train_s,
                    "peak_memory_gib": self.peak_memory_bytes / GIB}
        return {"loss": clean(self.loss), "mismatch_kl": clean(self.mismatch_kl),
                "mismatch_kl_masked": clean(self.mismatch_kl_masked),
                "mismatch_kl_unmasked": clean(self.mismatch_kl_unmasked),
                "masked_fraction": self.masked_fraction, "masked_low_fraction": self.masked_low_fraction,
                "masked_high_fraction": self.masked_high_fraction, "entropy": clean(self.entropy),
                "grad_norm": clean(self.grad_norm), "skipped": self.skipped, "zero_advantage": self.zero_advantage,
                "num_tokens": self.num_tokens, "tokens_per_s": per_s(self.all_tokens),
                "forward_tokens": self.forward_tokens, "forward_tokens_per_s": per_s(self.forward_tokens),
                "train_s": self.train_s, "peak_memory_gib": self.peak_memory_bytes / GIB, **(self.routing or {})}


def clip_gradients(params: list[torch.nn.Parameter], max_norm: float) -> float:
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor when sharded


def wait_for_device(device: torch.device) -> None:
    """CUDA runs asynchronously: a clock read before this would miss the queued kernels."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_bytes(device: torch.device) -> int:
    """The CUDA caching allocator's peak reservation on CUDA, else this process's peak resident set."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_reserved(device))
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def forward_tokens(mb: MicroBatch) -> int:
    rows, width = mb.input_ids.shape
    return mb.prefix_len + rows * (width - mb.prefix_len)


def train_step(model: Any, optimizer: Any, scheduler: Any, params: list[torch.nn.Parameter],
               samples: list[dict[str, Any]], config: RLConfig, device: torch.device, pad_id: int,
               dist: Dist = Dist()) -> StepResult:
    """`model`: the peft model, or LossPositionLogprobs around it (the FSDP root when sharded)."""
    started = time.perf_counter()
    if not isinstance(model, LossPositionLogprobs):
        model = LossPositionLogprobs(model)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_tokens = loss_token_count(samples)
    sft = config.is_sft
    zero_advantage = not sft and loss_tokens > 0 and not any(has_signal(s) for s in samples)
    sums = StepSums(device)
    sampling = SFT_SAMPLING if sft else SamplingTransform.from_config(config.orchestrator.sampling)
    grad_scale = dist.world if dist.sharded else 1  # FSDP averages over ranks; the batch's gradient is the sum
    # a shared prompt runs once per micro-batch, on a KV cache. Not with activation checkpointing (it
    # drops caches) nor when sharded (a cached pass runs the decoder twice, so ranks running different
    # kinds of passes would gather weights a different number of times)
    share = config.trainer.model.ac is None and not dist.sharded
    trainer = config.trainer
    batches = plan_micro_batches(samples, pack=trainer.pack and supports_packing(model.model),
                                 budget=trainer.micro_batch_tokens or config.seq_len, size=trainer.micro_batch_size,
                                 pad_id=pad_id, device=device, share_prefix=share)
    passes = dist.passes(batches) if loss_tokens else []
    for index, (mb, counts) in enumerate(passes):
        if mb.loss_tokens == 0 and not dist.sharded:
            continue
        if dist.sharded and not zero_advantage:  # reduce the gradients once, after the last pass
            model.set_requires_gradient_sync(index == len(passes) - 1)
        sums.forward_tokens += forward_tokens(mb)
        with torch.set_grad_enabled(not zero_advantage):  # no signal: the forward only reports metrics
            logp, entropy = model(mb.input_ids, mb.attention_mask, mb.loss_mask, sampling.temperature,
                                  mb.prefix_len, mb.loss_index, mb.padded, sampling, mb.position_ids,
                                  mb.document_lengths)
            routing = getattr(model.model, "prime_router_margins", None)
            parts = sft_loss(logp, loss_tokens) if sft else policy_loss(
                logp, mb.inference_logprobs, mb.advantages, config.trainer.loss, loss_tokens,
                routing.near_tie if routing is not None else None)
        if not counts:  # a pass that only keeps sharded ranks in step: no gradient, no metrics
            if not zero_advantage:
                (parts.loss * 0.0).backward()
            continue
        if not zero_advantage:
            (parts.loss * grad_scale).backward()
        sums.add(loss=parts.loss, mismatch_kl=parts.mismatch_kl_sum, mismatch_kl_masked=parts.mismatch_kl_masked_sum,
                 masked_low=parts.masked_low, masked_high=parts.masked_high, entropy=entropy.sum(),
                 near_tie=parts.near_tie, near_tie_masked=parts.near_tie_masked, near_tie_kl=parts.near_tie_kl_sum)
    if not zero_advantage:
        dist.sum_grads(params)
    totals = sums.read(dist)  # the step's one read of the device
    masked = totals.masked_low + totals.masked_high
    grad_norm = clip_gradients(params, config.trainer.optim.max_norm) if loss_tokens and not zero_advantage else 0.0
    skipped = loss_tokens == 0 or not (math.isfinite(totals.loss) and math.isfinite(grad_norm))
    if skipped or zero_advantage:
        optimizer.zero_grad(set_to_none=True)
    else:
        optimizer.step()
    with warnings.catch_warnings():  # a step without an optimizer step still advances the schedule; torch warns
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()
    wait_for_device(device)
    n = max(loss_tokens, 1)  # (the unmasked k3: two sums rounded apart, so it is kept >= 0 below)
    return StepResult(loss=totals.loss, mismatch_kl=totals.mismatch_kl / n, masked_fraction=masked / n,
                      entropy=totals.entropy / n, grad_norm=grad_norm, skipped=skipped, num_tokens=loss_tokens,
                      all_tokens=sum(len(s["input_ids"]) for s in samples), train_s=time.perf_counter() - started,
                      zero_advantage=zero_advantage, mismatch_kl_masked=totals.mismatch_kl_masked / max(masked, 1),
                      mismatch_kl_unmasked=max(totals.mismatch_kl - totals.mismatch_kl_masked, 0.0)
                      / max(loss_tokens - masked, 1),
                      masked_low_fraction=totals.masked_low / n, masked_high_fraction=totals.masked_high / n,
                      forward_tokens=int(totals.forward_tokens), peak_memory_bytes=peak_memory_bytes(device),
                      routing=routing_metrics(totals, n) if hasattr(model.model, "prime_router_margins") else None,
                      sft=sft)


def routing_metrics(totals: Any, loss_tokens: float) -> dict[str, float]:
    ties = totals.near_tie
    return {"routing_near_tie_fraction": ties / loss_tokens,
            "routing_near_tie_masked_fraction": totals.near_tie_masked / max(ties, 1),
            "mismatch_kl_near_tie": totals.near_tie_kl / max(ties, 1)}
