"""rollouts/step_N/batch.jsonl -> padded micro-batches of tensors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # (b, L) right-padded
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    inference_logprobs: torch.Tensor  # flat over loss tokens (position >= 1), row-major
    advantages: torch.Tensor  # flat, one per loss token

    @property
    def loss_tokens(self) -> int:
        return int(self.inference_logprobs.numel())


def read_batch(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def loss_token_count(samples: list[dict[str, Any]]) -> int:
    return sum(sum(s["loss_mask"][1:]) for s in samples)


def micro_batches(samples: list[dict[str, Any]], size: int, pad_id: int, device: torch.device) -> list[MicroBatch]:
    """Samples sorted by length so each micro-batch pads little; the order does not change the sum."""
    ordered = sorted(samples, key=lambda s: len(s["input_ids"]))
    out = []
    for start in range(0, len(ordered), size):
        chunk = ordered[start:start + size]
        width = max(len(s["input_ids"]) for s in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(chunk), width), dtype=torch.long)
        loss_mask = torch.zeros((len(chunk), width), dtype=torch.long)
        inference, advantages = [], []
        for row, sample in enumerate(chunk):
            n = len(sample["input_ids"])
            ids[row, :n] = torch.tensor(sample["input_ids"])
            attention[row, :n] = 1
            mask = list(sample["loss_mask"])
            mask[0] = 0  # the first token has no prediction
            loss_mask[row, :n] = torch.tensor(mask)
            for i in range(1, n):
                if mask[i]:
                    inference.append(float(sample["inference_logprobs"][i]))
                    advantages.append(float(sample["advantage"]))
        out.append(MicroBatch(ids.to(device), attention.to(device), loss_mask.to(device),
                              torch.tensor(inference, dtype=torch.float32, device=device),
                              torch.tensor(advantages, dtype=torch.float32, device=device)))
    return out
