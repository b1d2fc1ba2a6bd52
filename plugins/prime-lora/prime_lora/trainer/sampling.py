"""The distribution vLLM samples from, applied to the trainer's fp32 logits.

vLLM (v1 sampler, `--logprobs-mode processed_logprobs`) turns a position's raw fp32 logits into the
log-probs it samples from and returns, in this order: repetition penalty (tokens seen in the prompt or
the output so far: a positive logit divided by the penalty, any other multiplied by it), division by
the temperature, min_p (tokens whose probability is below min_p x the largest probability get -inf),
top_k (tokens whose logit is below the k-th largest get -inf: ties at the boundary all survive), top_p
(logits sorted ascending; a token gets -inf when the cumulative probability up to and including it is
<= 1 - top_p; the largest always survives), then log_softmax. `processed_logits` repeats those steps
with the same tensor operations, so that the survivors and their log-probs are the sampler's. The
selection (which tokens survive) carries no gradient; gradients flow through the surviving logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class SamplingTransform:
    temperature: float = 1.0
    top_k: int = -1  # -1 or 0: off
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0

    @classmethod
    def from_config(cls, sampling: Any) -> SamplingTransform:
        return cls(temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p,
                   min_p=sampling.min_p, repetition_penalty=sampling.repetition_penalty)

    @property
    def truncates(self) -> bool:
        """Some tokens may be cut from the distribution (top_k, top_p, min_p)."""
        return self.top_k > 0 or self.top_p < 1.0 or self.min_p > 0.0

    @property
    def penalises(self) -> bool:
        return self.repetition_penalty != 1.0

    @property
    def plain(self) -> bool:
        """Only the temperature: the fast path, log_softmax(logits / temperature)."""
        return not (self.truncates or self.penalises)


def first_occurrences(input_ids: torch.Tensor, vocab_size: int, samples: torch.Tensor | None = None,
                      sample_count: int = 0) -> torch.Tensor:
    """(rows, vocab) int32: the first index at which each token appears in each row, L where it does not.

    Token v was seen before index i of row r exactly when first[r, v] < i, so one (rows, vocab) table
    gives every position's seen-set (rows x vocab x 4 bytes: 4.9 MB for 8 rows of a 152k vocabulary).
    A packed row (one row, `samples`[i] the sample of index i) gets a table row per sample instead,
    holding indexes into the packed row: a sample's tokens come after its start, so first[s, v] < i
    then means "earlier in the same sample".
    """
    rows, length = input_ids.shape
    if samples is not None:
        first = torch.full((sample_count, vocab_size), length, dtype=torch.int32, device=input_ids.device)
        flat = samples.to(torch.long) * vocab_size + input_ids[0].clamp(0, vocab_size - 1)
        index = torch.arange(length, dtype=torch.int32, device=input_ids.device)
        return first.view(-1).scatter_reduce_(0, flat, index, reduce="amin").view(sample_count, vocab_size)
    first = torch.full((rows, vocab_size), length, dtype=torch.int32, device=input_ids.device)
    index = torch.arange(length, dtype=torch.int32, device=input_ids.device).expand(rows, length)
    return first.scatter_reduce_(1, input_ids.clamp(0, vocab_size - 1), index, reduce="amin")


def sample_index(document_lengths: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """For a packed row: the sample each index belongs to."""
    lengths = torch.tensor(document_lengths, device=device)
    return torch.repeat_interleave(torch.arange(len(document_lengths), device=device), lengths)


@dataclass(frozen=True)
class SeenTokens:
    """For n loss positions: the rows' first occurrences, each position's row and the index of the token
    it predicts; `mask(chunk)` is the (chunk, vocab) bool of tokens seen before (prompt and output so far),
    built per chunk of the LM head (chunk x vocab bytes)."""

    first: torch.Tensor  # (rows, vocab) int32, from first_occurrences
    rows: torch.Tensor  # (n,)
    token_index: torch.Tensor  # (n,)

    def mask(self, chunk: slice) -> torch.Tensor:
        return self.first[self.rows[chunk]] < self.token_index[chunk, None].to(self.first.dtype)


def processed_logits(logits: torch.Tensor, transform: SamplingTransform, seen: torch.Tensor | None = None,
                     keep: torch.Tensor | None = None) -> torch.Tensor:
    """(n, vocab) fp32 raw logits -> the sampler's processed logits (-inf for the tokens cut).

    `seen` (n, vocab) bool is needed for a repetition penalty. `keep` (n,) token ids always survive:
    they were sampled, so they were among the sampler's survivors, and a logit that differs from
    the sampler's in the last bits must not turn their log-prob into -inf.
    """
    if transform.penalises:
        assert seen is not None, "a repetition penalty needs the tokens seen so far"
        penalty = torch.full((), transform.repetition_penalty, dtype=logits.dtype, device=logits.device)
        penalties = torch.where(seen, penalty, torch.ones_like(penalty))
        logits = logits * torch.where(logits > 0, 1.0 / penalties, penalties)
    logits = logits / transform.temperature
    if not transform.truncates:
        return logits
    with torch.no_grad():
        cut = _cut_mask(logits.detach(), transform)
        if keep is not None:
            cut.scatter_(1, keep[:, None], False)
    return logits.masked_fill(cut, float("-inf"))


def _cut_mask(logits: torch.Tensor, transform: SamplingTransform) -> torch.Tensor:
    """The tokens min_p, top_k and top_p remove, as the sampler decides them (logits after temperature)."""
    cut = torch.zeros_like(logits, dtype=torch.bool)
    if transform.min_p > 0:
        probs = torch.softmax(logits, dim=-1)
        cut |= probs < probs.amax(dim=-1, keepdim=True) * transform.min_p
    masked = logits.masked_fill(cut, float("-inf"))
    top_k = transform.top_k if 0 < transform.top_k < logits.shape[-1] else None
    if transform.top_p >= 1.0:
        if top_k is not None:
            cut |= masked < masked.topk(top_k, dim=-1).values[:, -1:]
        return cut
    ascending, order = masked.sort(dim=-1, descending=False)
    if top_k is not None:
        ascending = ascending.masked_fill(ascending < ascending[:, -top_k:-top_k + 1 or None], float("-inf"))
    one_minus_p = 1 - torch.full((), transform.top_p, dtype=logits.dtype, device=logits.device)
    below = ascending.softmax(dim=-1).cumsum(dim=-1) <= one_minus_p
    below[:, -1] = False  # the most probable token always survives
    sorted_cut = below | torch.isneginf(ascending)
    return cut | torch.zeros_like(cut).scatter_(1, order, sorted_cut)


def processed_log_probs(logits: torch.Tensor, transform: SamplingTransform, seen: torch.Tensor | None,
                        targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs of `targets`, entropies) of the processed distribution; the log-probs carry gradients."""
    log_probs = torch.log_softmax(processed_logits(logits, transform, seen, keep=targets), dim=-1)
    logp = log_probs.gather(-1, targets[:, None]).squeeze(-1)
    with torch.no_grad():
        probs = log_probs.exp()
        entropy = -(probs * log_probs.masked_fill(probs == 0, 0.0)).sum(-1)
    return logp, entropy
