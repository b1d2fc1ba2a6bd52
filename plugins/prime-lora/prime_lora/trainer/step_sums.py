"""A step's metric sums over its micro-batches, by name.

The sums stay on the device in one float64 vector (one `+=` per micro-batch, no host sync); `read` moves
them to the host once per step, summed across data-parallel ranks, with the forward tokens (counted on the
host) in the same vector: one all-reduce and one device-to-host read per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .distributed import Dist

# the sums added on the device, in the order of the vector (StepSums.add takes them by these names)
DEVICE_SUMS = ("loss", "mismatch_kl", "mismatch_kl_masked", "masked_low", "masked_high", "entropy", "near_tie",
               "near_tie_masked", "near_tie_kl")
_NAMES = frozenset(DEVICE_SUMS)


@dataclass(frozen=True)
class StepTotals:
    """A step's sums over every rank's micro-batches."""

    loss: float  # the batch loss (each micro-batch's share already divided by the batch's loss tokens)
    mismatch_kl: float  # k3 over every loss token
    mismatch_kl_masked: float  # k3 over the tokens masked by the ratio band
    masked_low: float  # tokens masked because ratio < ratio_low
    masked_high: float  # tokens masked because ratio > ratio_high
    entropy: float  # over every loss token
    near_tie: float  # an MoE's loss tokens at a routing near-tie (routing.py)
    near_tie_masked: float  # ... of them masked by the ratio band
    near_tie_kl: float  # k3 over them
    forward_tokens: float  # token positions the model ran


class StepSums:
    def __init__(self, device: torch.device):
        self.device = device
        self.on_device = torch.zeros(len(DEVICE_SUMS), dtype=torch.float64, device=device)
        self.forward_tokens = 0

    def add(self, **sums: torch.Tensor) -> None:
        """One micro-batch's sums, each a 0-d tensor named as in DEVICE_SUMS."""
        if sums.keys() != _NAMES:
            raise TypeError(f"StepSums.add takes {', '.join(DEVICE_SUMS)}; got {', '.join(sums)}")
        self.on_device += torch.stack([sums[name].detach().to(torch.float64) for name in DEVICE_SUMS])

    def read(self, dist: Dist) -> StepTotals:
        """The step's one read of the device. torch.full fills on the device (no host-to-device copy)."""
        tokens = torch.full((1,), float(self.forward_tokens), dtype=torch.float64, device=self.device)
        *device_sums, forward_tokens = dist.sum_tensor(torch.cat((self.on_device, tokens))).tolist()
        return StepTotals(**dict(zip(DEVICE_SUMS, device_sums, strict=True)), forward_tokens=forward_tokens)
