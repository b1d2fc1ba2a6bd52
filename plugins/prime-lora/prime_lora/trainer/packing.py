"""Packing: a step's samples end to end in rows of at most `budget` tokens (first-fit decreasing).

Each row is one micro-batch of batch size 1: its position ids restart at 0 at each sample and its
attention stays within each sample (packed_attention.py), so every sample's log-probs are those it
would have alone and no token is padding. The loss is a sum over loss tokens divided by the batch's
count, so how samples are grouped into rows does not change it nor its gradient.
"""

from __future__ import annotations

import torch

from prime_cli.train.plugin_api import TrainingSample

from .batches import MicroBatch, loss_targets


def first_fit_decreasing(lengths: list[int], budget: int) -> list[list[int]]:
    """Indexes of `lengths` in rows whose lengths sum to at most `budget` (a longer item gets a row alone).
    Longest first, each into the first row with room: within 11/9 of the fewest rows possible."""
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        length = lengths[index]
        row = next((r for r, free in enumerate(room) if free >= length), None)
        if row is None:
            rows.append([index])
            room.append(budget - length)
        else:
            rows[row].append(index)
            room[row] -= length
    return rows


def packed_row(samples: list[TrainingSample], device: torch.device, pad_id: int = 0,
               pad_to: int | None = None) -> MicroBatch:
    """One row of `samples` end to end; with `pad_to`, padded to that many tokens by a filler sample with
    no loss tokens (a fixed row length for a caller that needs one: the trainer does not, as compiled
    layers take the row length as a dynamic shape)."""
    ids: list[int] = []
    loss_mask: list[int] = []
    positions: list[int] = []
    inference: list[float] = []
    advantages: list[float] = []
    lengths: list[int] = []
    for sample in samples:
        n = len(sample["input_ids"])
        mask, sample_inference, sample_advantages = loss_targets(sample)
        ids += sample["input_ids"]
        loss_mask += mask
        positions += range(n)
        lengths.append(n)
        inference += sample_inference
        advantages += sample_advantages
    filler = (pad_to or 0) - len(ids)
    if filler > 0:
        ids += [pad_id] * filler
        loss_mask += [0] * filler
        positions += range(filler)
        lengths.append(filler)
    input_ids = torch.tensor([ids], dtype=torch.long)
    mask_tensor = torch.tensor([loss_mask], dtype=torch.long)
    loss_index = mask_tensor[:, 1:].flatten().nonzero().squeeze(1)
    return MicroBatch(input_ids.to(device), torch.ones_like(input_ids).to(device), mask_tensor.to(device),
                      torch.tensor(inference, dtype=torch.float32, device=device),
                      torch.tensor(advantages, dtype=torch.float32, device=device), 0, loss_index.to(device),
                      padded=False, document_lengths=tuple(lengths),
                      position_ids=torch.tensor([positions], dtype=torch.long, device=device))


def packed_micro_batches(samples: list[TrainingSample], budget: int, device: torch.device, pad_id: int = 0,
                         pad_to_budget: bool = False) -> list[MicroBatch]:
    rows = first_fit_decreasing([len(s["input_ids"]) for s in samples], budget)
    return [packed_row([samples[i] for i in row], device, pad_id,
                       pad_to=budget if pad_to_budget else None) for row in rows]


# sharing a prompt's KV cache wins over packing when it runs at most this fraction of packing's token
# positions (it pays padding among the group's completions and a second decoder call per micro-batch)
SHARE_WHEN_BELOW = 0.6


def shared_positions(group: list[TrainingSample], prefix_len: int, size: int) -> int:
    """Token positions the shared-prompt path runs for `group`: the prompt once per micro-batch of
    `size`, and every row padded to its micro-batch's longest completion."""
    lengths = sorted(len(s["input_ids"]) for s in group)
    chunks = [lengths[i:i + size] for i in range(0, len(lengths), size)]
    return sum(prefix_len + len(chunk) * (chunk[-1] - prefix_len) for chunk in chunks)


def plan_micro_batches(samples: list[TrainingSample], *, pack: bool, budget: int, size: int, pad_id: int,
                       device: torch.device, share_prefix: bool = False) -> list[MicroBatch]:
    """The step's micro-batches: prompt groups on a shared KV cache where that runs clearly fewer token
    positions than packing them (or always, without packing), the other samples packed (or padded)."""
    from .batches import padded_batches, prefix_groups, split_shared

    groups = prefix_groups(samples) if share_prefix else {}
    shared = {key: group for key, group in groups.items()
              if not pack or shared_positions(group, len(key), size)
              <= SHARE_WHEN_BELOW * sum(len(s["input_ids"]) for s in group)}
    out, rest = split_shared(samples, shared, size, pad_id, device)
    if not rest:
        return out
    if pack:
        return out + packed_micro_batches(rest, budget, device, pad_id)
    return out + padded_batches(rest, size, pad_id, device)
