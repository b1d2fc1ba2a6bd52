"""The policy loss: importance-weighted advantages with the ratio band masked, token-sum normalised.

With d = clamp(logp_train - logp_inference, -c, c) and r = exp(d), tokens whose r lies outside
[ratio_low, ratio_high] are masked; loss = -sum(mask * r * A) / total_loss_tokens. The gradient of
r * A is r * A * grad(logp): the usual policy gradient, reweighted for the sampler's mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from prime_cli.train.plugin_api import LossConfig


@dataclass
class LossParts:
    """The loss and this micro-batch's metric sums, as tensors (summed on the device, read once per step)."""

    loss: torch.Tensor  # this micro-batch's share of the batch loss
    mismatch_kl_sum: torch.Tensor  # k3 over every loss token
    mismatch_kl_masked_sum: torch.Tensor  # k3 over the masked tokens only
    masked_low: torch.Tensor  # tokens masked because ratio < ratio_low
    masked_high: torch.Tensor  # tokens masked because ratio > ratio_high
    tokens: int
    near_tie: torch.Tensor | None = None  # an MoE's tokens at a routing near-tie (routing.py); 0 when dense
    near_tie_masked: torch.Tensor | None = None  # ... of them masked by the ratio band
    near_tie_kl_sum: torch.Tensor | None = None  # k3 over them

    @property
    def masked(self) -> torch.Tensor:
        return self.masked_low + self.masked_high


def policy_loss(logp: torch.Tensor, inference_logp: torch.Tensor, advantages: torch.Tensor, config: LossConfig,
                total_loss_tokens: int, near_tie: torch.Tensor | None = None) -> LossParts:
    """All tensors are flat over the loss tokens of one micro-batch; `total_loss_tokens` counts the batch's.
    `near_tie` flags an MoE's routing near-ties: counted apart, masked by the same ratio band."""
    log_ratio = logp - inference_logp
    clamped = log_ratio.clamp(-config.log_ratio_clamp, config.log_ratio_clamp)
    ratio = torch.exp(clamped)
    low, high = (ratio < config.ratio_low).detach(), (ratio > config.ratio_high).detach()
    keep = (~(low | high)).to(logp.dtype)
    loss = -(keep * ratio * advantages).sum() / max(total_loss_tokens, 1)
    with torch.no_grad():
        d = clamped.detach().to(torch.promote_types(clamped.dtype, torch.float32))
        # tokens were sampled from the inference policy, so with r = p_train / p_inference = exp(d) the
        # k3 estimator r - 1 - log r is unbiased for KL(inference || train) and never negative. For
        # d near 0, exp(d) - d - 1 loses every digit (exp(d) rounds next to 1) and can come out below 0;
        # expm1(d) - d keeps them, and the clamp removes what rounding is left
        kl = (torch.expm1(d) - d).clamp_min(0.0)
        parts = LossParts(loss=loss, mismatch_kl_sum=kl.sum(), mismatch_kl_masked_sum=(kl * (1 - keep)).sum(),
                          masked_low=low.sum(), masked_high=high.sum(), tokens=int(logp.numel()))
        tie = near_tie.to(kl.dtype) if near_tie is not None else kl.new_zeros(kl.shape)
        parts.near_tie, parts.near_tie_masked = tie.sum(), (tie * (1 - keep)).sum()
        parts.near_tie_kl_sum = (tie * kl).sum()
        return parts
