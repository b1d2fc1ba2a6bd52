"""Attention confined to each sample of a packed row.

A packed row holds several samples end to end, their position ids restarting at 0 at each sample; a
token must attend only to earlier tokens of its own sample. The decoder runs on such a row with those
position ids, no attention mask, and the samples' lengths as `packed_lengths` (a CPU tensor), a keyword
transformers passes down to every layer's attention function:

- `prime_sdpa` (registered here with transformers; the trainer's attention on every device):
  scaled_dot_product_attention once per sample, causal, on that sample's slice of the row. Exact, and
  no n x n mask: attention costs the sum of the squares of the sample lengths, not the row's square;
  on CUDA each call is a flash / cuDNN kernel. Its mask function builds no mask where attention is
  causal (transformers would build an (n, n) one for a packed row) and sdpa's own mask for padded
  rows and a KV cache, where the function is transformers' sdpa.
- The lengths are a tensor rather than a tuple so that a compiled decoder layer does not specialise,
  and recompile, on every new tuple of lengths; they are a keyword rather than state set around the
  call so that activation checkpointing's recomputation (in backward, outside any such block) sees
  them too. The function is excluded from compilation (a graph break around attention) and reads the
  lengths on the host, where they live: no device sync.

- `prime_varlen` (`trainer.model.attention = "varlen"`, CUDA only): torch's variable-length flash
  attention (`torch.nn.attention.varlen.varlen_attn`) over the whole row in one kernel per layer, the
  samples told apart by their cumulative lengths, instead of one SDPA call per sample from Python.
  Padded rows and a KV cache go to sdpa, as with `prime_sdpa`.

FlexAttention with a document block mask was tried and left out for now: on CPU (torch 2.13) it has
no backward and its compiled forward failed to build, so it could not be checked here.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

PACKED_SDPA = "prime_sdpa"
PACKED_VARLEN = "prime_varlen"
ATTENTION_IMPLEMENTATIONS = {"sdpa": PACKED_SDPA, "varlen": PACKED_VARLEN}  # trainer.model.attention -> name


@torch.compiler.disable
def packed_sdpa_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                        packed_lengths: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """query (1, heads, n, d), key / value (1, kv_heads, n, d) -> ((1, n, heads, d), None), as sdpa's."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if packed_lengths is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    lengths = packed_lengths.tolist()
    check_packed_row(query, attention_mask, sum(lengths))
    groups = query.shape[1] // key.shape[1]
    # torch.split, not a slice per sample: its backward is one concatenation, where slices' would each
    # add into a zero tensor of the whole row
    outputs = [torch.nn.functional.scaled_dot_product_attention(
        q, k, v, dropout_p=dropout if module.training else 0.0, is_causal=q.shape[2] > 1, scale=scaling,
        enable_gqa=groups > 1) for q, k, v in zip(*(t.split(lengths, dim=2) for t in (query, key, value)), strict=True)]
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous(), None


@torch.compiler.disable
def packed_varlen_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                          packed_lengths: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """As `packed_sdpa_forward`, with one varlen flash-attention call for the whole packed row."""
    if packed_lengths is None or (dropout and module.training):  # the varlen kernel has no dropout
        return packed_sdpa_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                   packed_lengths=packed_lengths, **kwargs)
    check_packed_row(query, attention_mask, int(packed_lengths.sum()))
    bounds = torch.nn.functional.pad(packed_lengths.cumsum(0), (1, 0)).to(query.device, torch.int32, non_blocking=True)
    longest = int(packed_lengths.max())
    # (1, heads, n, d) -> (n, heads, d), the layout of flash attention's varlen kernels
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))
    out = varlen_attention()(q, k, v, bounds, bounds, longest, longest, scale=scaling)
    return out.unsqueeze(0), None


def check_packed_row(query: torch.Tensor, attention_mask: torch.Tensor | None, tokens: int) -> None:
    if query.shape[0] != 1 or attention_mask is not None or tokens != query.shape[2]:
        raise ValueError(f"a packed row is one row of {tokens} tokens without a mask "
                         f"(got query {tuple(query.shape)}, mask {attention_mask is not None})")


def varlen_attention() -> Any:
    """torch's varlen_attn, causal, with grouped KV heads, on the torch at hand: 2.11+ spell causal as
    window_size=(-1, 0) (2.10 as is_causal=True); where it lacks enable_gqa, KV heads are repeated."""
    from torch.nn.attention.varlen import varlen_attn

    causal, has_gqa = varlen_signature(varlen_attn)

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        groups = q.shape[1] // k.shape[1]
        if groups > 1 and has_gqa:
            kwargs["enable_gqa"] = True
        elif groups > 1:
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        return varlen_attn(q, k, v, *args, **causal, **kwargs)

    return attend


@functools.cache
def varlen_signature(varlen_attn: Any) -> tuple[dict[str, Any], bool]:
    """(the causal keyword, whether enable_gqa exists) of this torch's varlen_attn, read once rather than
    on every layer's call."""
    parameters = inspect.signature(varlen_attn).parameters
    causal = {"window_size": (-1, 0)} if "window_size" in parameters else {"is_causal": True}
    return causal, "enable_gqa" in parameters


def packed_sdpa_mask(*args: Any, attention_mask: torch.Tensor | None = None, q_length: int = 0, kv_length: int = 0,
                     q_offset: int = 0, kv_offset: int = 0, **kwargs: Any) -> torch.Tensor | None:
    """No mask where attention is causal, over the whole row or per sample; sdpa's own mask for padded
    rows and for a KV cache."""
    from transformers.masking_utils import sdpa_mask

    if attention_mask is None and q_length == kv_length and q_offset == 0 and kv_offset == 0:
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, q_length=q_length, kv_length=kv_length,
                     q_offset=q_offset, kv_offset=kv_offset, **kwargs)


def register() -> None:
    """Make `prime_sdpa` and `prime_varlen` names transformers accepts as attn_implementation (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(PACKED_SDPA, packed_sdpa_forward)
    AttentionInterface.register(PACKED_VARLEN, packed_varlen_forward)
    for name in (PACKED_SDPA, PACKED_VARLEN):
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, packed_sdpa_mask)


def supports_packing(model: Any) -> bool:
    """Every layer attends to all earlier tokens (no sliding window, which the per-sample calls ignore)
    and runs `prime_sdpa` or `prime_varlen`."""
    config = getattr(model, "config", None)
    layer_types = getattr(config, "layer_types", None) or []
    sliding = getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True)
    return (getattr(config, "_attn_implementation", None) in (PACKED_SDPA, PACKED_VARLEN)
            and all(kind == "full_attention" for kind in layer_types) and not (sliding and not layer_types))
