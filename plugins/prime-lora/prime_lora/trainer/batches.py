"""rollouts/step_N/batch.jsonl -> micro-batches of tensors.

By default the samples are packed (packing.py): each micro-batch is one row of at most
`micro_batch_tokens` tokens holding several samples end to end, so no token is padding. Without
packing, `micro_batch_size` samples sorted by length are padded to the longest. With `share_prefix`,
the rollouts of one group (same prompt tokens up to the first loss token) go into micro-batches of
their own, marked with the prefix length: the trainer then runs the prompt once and the completions
on top of its KV cache (logprobs.py), instead of the prompt once per rollout (packing.py decides per
group which of the two runs fewer token positions).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from prime_cli.train.plugin_api import TrainingSample, read_json_lines


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # (b, L) right-padded
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    inference_logprobs: torch.Tensor  # flat over loss tokens (position >= 1), row-major
    advantages: torch.Tensor  # flat, one per loss token
    prefix_len: int = 0  # > 0: every row starts with the same prefix_len tokens, none of them a loss token
    # where the loss tokens are, computed on the host so that the device never has to report it back:
    # flat indices into the (b, L - max(prefix_len, 1)) positions that predict a token, and whether
    # any row is padded
    loss_index: torch.Tensor | None = None
    padded: bool = True
    # a packed row (one row, several samples end to end): each sample's length, and position ids that
    # restart at 0 at each sample
    document_lengths: tuple[int, ...] | None = None
    position_ids: torch.Tensor | None = None

    @property
    def loss_tokens(self) -> int:
        return int(self.inference_logprobs.numel())


def read_batch(path: Path) -> list[TrainingSample]:
    return read_json_lines(path)  # type: ignore[return-value]


def loss_token_count(samples: list[TrainingSample]) -> int:
    return sum(sum(s["loss_mask"][1:]) for s in samples)


def prefix_length(sample: TrainingSample) -> int:
    """Tokens before the first loss token (the prompt of a single-turn rollout)."""
    mask = sample["loss_mask"]
    return next((i for i in range(1, len(mask)) if mask[i]), len(mask))


def prefix_groups(samples: list[TrainingSample]) -> dict[tuple[int, ...], list[TrainingSample]]:
    """Groups of more than one sample with the same prompt (tokens before the first loss token)."""
    groups: dict[tuple[int, ...], list[TrainingSample]] = {}
    for sample in samples:
        groups.setdefault(tuple(sample["input_ids"][:prefix_length(sample)]), []).append(sample)
    return {key: group for key, group in groups.items() if len(group) > 1 and len(key) > 1}


def shared_prefix_batches(group: list[TrainingSample], prefix_len: int, size: int, pad_id: int,
                          device: torch.device) -> list[MicroBatch]:
    ordered = sorted(group, key=lambda s: len(s["input_ids"]))
    return [_pack(ordered[i:i + size], pad_id, device, prefix_len) for i in range(0, len(ordered), size)]


def padded_batches(samples: list[TrainingSample], size: int, pad_id: int, device: torch.device) -> list[MicroBatch]:
    """Samples sorted by length so each micro-batch pads little; the order does not change the sum."""
    ordered = sorted(samples, key=lambda s: len(s["input_ids"]))
    return [_pack(ordered[i:i + size], pad_id, device, 0) for i in range(0, len(ordered), size)]


def micro_batches(samples: list[TrainingSample], size: int, pad_id: int, device: torch.device,
                  share_prefix: bool = False) -> list[MicroBatch]:
    """Padded micro-batches of `size` samples; with `share_prefix`, each prompt group's on its prompt's cache."""
    out, rest = split_shared(samples, prefix_groups(samples) if share_prefix else {}, size, pad_id, device)
    return out + padded_batches(rest, size, pad_id, device)


def split_shared(samples: list[TrainingSample], shared: dict[tuple[int, ...], list[TrainingSample]], size: int,
                 pad_id: int, device: torch.device) -> tuple[list[MicroBatch], list[TrainingSample]]:
    """(the micro-batches of the `shared` prompt groups on their prompts' caches, the other samples)."""
    out = [mb for key, group in shared.items() for mb in shared_prefix_batches(group, len(key), size, pad_id, device)]
    rest = [s for s in samples if not shared or tuple(s["input_ids"][:prefix_length(s)]) not in shared]
    return out, rest


def loss_targets(sample: TrainingSample) -> tuple[list[int], list[float], list[float]]:
    """(the loss mask with the first token off, as it has no prediction; the inference log-prob and the
    advantage of each loss token, in order)."""
    mask = [0] + [int(m) for m in sample["loss_mask"][1:]]
    positions = [i for i in range(1, len(mask)) if mask[i]]
    return mask, [float(sample["inference_logprobs"][i]) for i in positions], loss_advantages(sample, positions)


def loss_advantages(sample: TrainingSample, positions: list[int]) -> list[float]:
    """The advantage of each loss token at `positions`: the sample's `token_advantages` where the orchestrator
    wrote them (on-policy distillation: the teacher's per-token term joins the environment's advantage),
    else its one `advantage` for every token."""
    per_token = sample.get("token_advantages")
    if per_token is None:
        return [float(sample["advantage"])] * len(positions)
    if len(per_token) != len(sample["input_ids"]):
        raise ValueError(f"a sample has {len(per_token)} token_advantages for {len(sample['input_ids'])} tokens: "
                         "the orchestrator writes one per token")
    return [float(per_token[i]) for i in positions]


def has_signal(sample: TrainingSample) -> bool:
    """Whether any loss token has a non-zero advantage (else the sample's gradient is zero)."""
    positions = [i for i in range(1, len(sample["loss_mask"])) if sample["loss_mask"][i]]
    return any(a != 0 for a in loss_advantages(sample, positions))


def _pack(chunk: list[TrainingSample], pad_id: int, device: torch.device, prefix_len: int) -> MicroBatch:
    width = max(len(s["input_ids"]) for s in chunk)
    ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(chunk), width), dtype=torch.long)
    loss_mask = torch.zeros((len(chunk), width), dtype=torch.long)
    inference, advantages = [], []
    for row, sample in enumerate(chunk):
        n = len(sample["input_ids"])
        ids[row, :n] = torch.tensor(sample["input_ids"])
        attention[row, :n] = 1
        mask, sample_inference, sample_advantages = loss_targets(sample)
        loss_mask[row, :n] = torch.tensor(mask)
        inference += sample_inference
        advantages += sample_advantages
    loss_index = loss_mask[:, max(prefix_len, 1):].flatten().nonzero().squeeze(1)
    return MicroBatch(ids.to(device), attention.to(device), loss_mask.to(device),
                      torch.tensor(inference, dtype=torch.float32, device=device),
                      torch.tensor(advantages, dtype=torch.float32, device=device), prefix_len,
                      loss_index.to(device), padded=not bool(attention.all()))
