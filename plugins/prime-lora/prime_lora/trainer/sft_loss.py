"""The SFT loss: cross-entropy on the loss-mask tokens (an SFT sample's assistant tokens), token-sum normalised.

loss = -sum(logp of the loss tokens) / (the batch's loss tokens), with logp the model's plain log-softmax at
temperature 1: the orchestrator's sampling settings (temperature, top_p, ...) shape what vLLM draws, not
what a data set's tokens are, so SFT never applies them. No importance ratio and no inference log-probs:
the batch's tokens were not sampled from the policy. The same LossParts as the RL loss, with the RL-only
sums at zero, so that the step runs one loop for both.
"""

from __future__ import annotations

import torch

from .loss import LossParts
from .sampling import SamplingTransform

SFT_SAMPLING = SamplingTransform()  # temperature 1, nothing cut: the model's own distribution


def sft_loss(logp: torch.Tensor, total_loss_tokens: int) -> LossParts:
    """`logp`: flat log-probs of one micro-batch's loss tokens; `total_loss_tokens` counts the batch's."""
    loss = -logp.sum() / max(total_loss_tokens, 1)
    zero = logp.new_zeros(()).detach()
    return LossParts(loss=loss, mismatch_kl_sum=zero, mismatch_kl_masked_sum=zero, masked_low=zero, masked_high=zero,
                     tokens=int(logp.numel()), near_tie=zero, near_tie_masked=zero, near_tie_kl_sum=zero)
