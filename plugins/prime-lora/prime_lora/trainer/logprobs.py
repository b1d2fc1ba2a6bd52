"""Per-token log-probabilities of the sampled tokens, computed only where the loss needs them.

The LM head runs on the hidden states of loss positions only, in chunks, so a long prompt or a big
vocabulary does not materialise a (batch, seq, vocab) tensor. The head's logits are fp32: on CUDA with
a bf16 model its matmuls take the bf16 hidden states and weight on tensor cores with an fp32 result
(the same products as casting first); elsewhere both are cast to fp32 before it. The log-sum-exp,
log-probs, entropies and the gradient of the logits are fp32 everywhere. Backward recomputes each chunk's
logits from the saved hidden states instead of keeping every chunk's (tokens, vocab) fp32 log-softmax:
saved memory is tokens x hidden, not tokens x vocab x 4 bytes (~5 GB at 8k tokens of Qwen3).
With top_k / top_p / min_p / repetition_penalty set, each chunk's logits go through the sampler's
transformation (sampling.py) before the log_softmax, in forward and in backward's recomputation.
"""

from __future__ import annotations

from typing import Any

import torch

from .model import compute_precision
from .sampling import (
    SamplingTransform,
    SeenTokens,
    first_occurrences,
    processed_log_probs,
    sample_index,
)

CHUNK_TOKENS = 1024


def inner_model_and_head(model: Any) -> tuple[Any, Any]:
    """(the decoder stack returning hidden states, the LM head) under peft's wrappers."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    return causal_lm.get_decoder() if hasattr(causal_lm, "get_decoder") else causal_lm.model, causal_lm.get_output_embeddings()


def token_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
                   temperature: float = 1.0, prefix_len: int = 0, loss_index: torch.Tensor | None = None,
                   padded: bool | None = None, sampling: SamplingTransform | None = None,
                   position_ids: torch.Tensor | None = None, document_lengths: tuple[int, ...] | None = None,
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropies of the tokens where loss_mask is 1, as flat tensors in row-major order.

    `sampling` (default: the temperature alone) is the distribution the sampler drew from; with a
    repetition penalty, each position's seen tokens are those of its row before it.

    Token i is predicted from position i-1, so loss_mask[:, 0] is ignored. With prefix_len > 0 every
    row starts with the same prefix_len tokens and has no loss token among them: the prefix runs once
    (batch 1) and the rest of the rows run on its KV cache; gradients flow back through the cache.
    `loss_index` and `padded` (MicroBatch's, known on the host) spare two device-to-host syncs.
    With `document_lengths`, the one row holds samples end to end (packing.py) with `position_ids`
    restarting at each; attention stays within each sample (packed_attention.py).
    """
    decoder, head = inner_model_and_head(model)
    if padded is None:
        padded = not bool(attention_mask.all())
    if not padded:
        attention_mask = None  # plain causal attention (flash kernels, no n^2 mask)
    start = max(prefix_len, 1)  # the first token a position in `predicting` predicts
    if loss_index is None:
        loss_index = loss_mask[:, start:].flatten().nonzero().squeeze(1)
    routing = getattr(model, "prime_router_margins", None)  # an MoE's routing near-ties (routing.py)
    if routing is not None:
        routing.start()
    with compute_precision(model, input_ids.device.type):  # (the head runs outside: fp32 logits)
        if prefix_len > 0:
            prefix = decoder(input_ids=input_ids[:1, :prefix_len], use_cache=True)
            cache = prefix.past_key_values
            cache.batch_repeat_interleave(input_ids.shape[0])
            rest = decoder(input_ids=input_ids[:, prefix_len:], attention_mask=attention_mask, past_key_values=cache,
                           use_cache=True).last_hidden_state
            last = prefix.last_hidden_state[:, -1:].expand(input_ids.shape[0], 1, -1)
            predicting = torch.cat([last, rest[:, :-1]], dim=1)  # hidden states predicting tokens prefix_len..
        elif document_lengths is not None:
            lengths = torch.tensor(document_lengths, dtype=torch.long)  # on the host: read there by the attention
            hidden = decoder(input_ids=input_ids, position_ids=position_ids, packed_lengths=lengths).last_hidden_state
            predicting = hidden[:, :-1]
        else:
            hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            predicting = hidden[:, :-1]  # predicting tokens 1..
    rows, columns = loss_index // predicting.shape[1], loss_index % predicting.shape[1]
    if routing is not None:
        calls = [(1, prefix_len), (input_ids.shape[0], input_ids.shape[1] - prefix_len)] if prefix_len > 0 \
            else [tuple(input_ids.shape)]
        routing.finish(calls, slice(start - 1, input_ids.shape[1] - 1), rows, columns)
    positions = predicting[rows, columns]  # (n, hidden)
    targets = input_ids[:, start:][rows, columns]  # (n,)
    sampling = sampling or SamplingTransform(temperature=temperature)
    seen = None
    if sampling.penalises:
        vocab = head.weight.shape[0] if hasattr(head, "weight") else head.out_features
        if document_lengths is None:
            seen = SeenTokens(first_occurrences(input_ids, vocab), rows, columns + start)
        else:  # a token was seen when it came earlier in the same sample: one table row per sample
            samples = sample_index(document_lengths, input_ids.device)
            seen = SeenTokens(first_occurrences(input_ids, vocab, samples, len(document_lengths)),
                              samples[columns + start], columns + start)
    return head_logprobs(positions, head, targets, sampling, seen=seen)


class _ChunkedHeadLogprobs(torch.autograd.Function):
    """log_softmax(hidden @ weight.T + bias) / T at `targets`, chunk by chunk in fp32, and the
    entropies (no gradient); with a non-plain `sampling`, of the sampler's processed logits instead.
    Saves the inputs only; backward recomputes the chunks' probabilities."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, sampling, seen, chunk_tokens):
        weight32 = _head_weight(hidden, weight)
        bias32 = _fp32(bias) if bias is not None else None
        logps, entropies = [], []
        for start in range(0, hidden.shape[0], chunk_tokens):
            chunk = slice(start, start + chunk_tokens)
            if not sampling.plain:
                logits = _chunk_logits(hidden[chunk], weight32, bias32, 1.0)
                seen_mask = seen.mask(chunk) if seen is not None else None
                logp, entropy = processed_log_probs(logits, sampling, seen_mask, targets[chunk])
                logps.append(logp)
                entropies.append(entropy)
                continue
            log_probs = _chunk_log_probs(hidden[chunk], weight32, bias32, sampling.temperature)
            logps.append(log_probs.gather(-1, targets[chunk, None]).squeeze(-1))
            entropies.append(-(log_probs.exp() * log_probs).sum(-1))
            del log_probs
        ctx.save_for_backward(hidden, weight, bias, targets)
        ctx.sampling, ctx.seen, ctx.chunk_tokens = sampling, seen, chunk_tokens
        entropy = torch.cat(entropies)
        ctx.mark_non_differentiable(entropy)
        return torch.cat(logps), entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        hidden, weight, bias, targets = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        weight32 = _head_weight(hidden, weight)
        bias32 = _fp32(bias) if bias is not None else None
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        grad_weight = torch.zeros_like(weight32, dtype=_fp32(weight32).dtype) if need_weight else None
        grad_bias = torch.zeros_like(bias32) if need_bias else None
        for start in range(0, hidden.shape[0], ctx.chunk_tokens):
            chunk = slice(start, start + ctx.chunk_tokens)
            if ctx.sampling.plain:
                grad_logits = _plain_grad_logits(hidden[chunk], weight32, bias32, targets[chunk],
                                                 grad_logp[chunk], ctx.sampling.temperature)
            else:
                seen = ctx.seen.mask(chunk) if ctx.seen is not None else None
                grad_logits = _processed_grad_logits(hidden[chunk], weight32, bias32, targets[chunk],
                                                     grad_logp[chunk], ctx.sampling, seen)
            if need_hidden:
                grad_hidden[chunk] = _fp32_matmul(grad_logits, weight32).to(hidden.dtype)
            if need_weight:
                grad_weight.addmm_(grad_logits.T, _fp32(hidden[chunk]))
            if need_bias:
                grad_bias += grad_logits.sum(0)
        return (grad_hidden, grad_weight.to(weight.dtype) if need_weight else None,
                grad_bias.to(bias.dtype) if need_bias else None, None, None, None, None)


def _plain_grad_logits(hidden, weight32, bias32, targets, grad_logp, temperature):
    # d logp[t] / d logits = onehot(t) - softmax, through the 1 / temperature
    grad_logits = torch.softmax(_chunk_logits(hidden, weight32, bias32, temperature), -1)
    grad_logits.neg_().scatter_add_(-1, targets[:, None], torch.ones_like(grad_logits[:, :1]))
    return grad_logits.mul_(_fp32(grad_logp[:, None]) / temperature)


def _processed_grad_logits(hidden, weight32, bias32, targets, grad_logp, sampling, seen):
    """Autograd through the sampler's transformation of one chunk's recomputed raw logits."""
    with torch.enable_grad():
        logits = _chunk_logits(hidden, weight32, bias32, 1.0).detach().requires_grad_(True)
        logp, _ = processed_log_probs(logits, sampling, seen, targets)
        (grad_logits,) = torch.autograd.grad(logp, logits, _fp32(grad_logp))
    return grad_logits


def _fp32(tensor: torch.Tensor) -> torch.Tensor:
    """fp32, or fp64 for fp64 inputs (gradient checks)."""
    return tensor if tensor.dtype == torch.float64 else tensor.float()


def _tensor_core_head(hidden: torch.Tensor, weight: torch.Tensor) -> bool:
    """bf16 / fp16 hidden states and head on CUDA: the head's matmuls take those inputs with an fp32 result
    (tensor cores; the same products as casting both to fp32 first, summed in another order)."""
    return (hidden.is_cuda and hidden.dtype in (torch.bfloat16, torch.float16) and weight.dtype == hidden.dtype
            and hasattr(torch.ops.aten.mm, "dtype"))


def _head_weight(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The head weight as the chunk matmuls take it: as is for tensor cores, else an fp32 copy."""
    return weight if _tensor_core_head(hidden, weight) else _fp32(weight)


def _fp32_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with an fp32 (or fp64) result; a low-precision `b` takes `a` in its dtype on tensor cores."""
    if b.dtype in (torch.bfloat16, torch.float16):
        return torch.mm(a.to(b.dtype), b, out_dtype=torch.float32)
    return _fp32(a) @ b


def _chunk_logits(hidden: torch.Tensor, weight32: torch.Tensor, bias32: torch.Tensor | None,
                  temperature: float) -> torch.Tensor:
    logits = _fp32_matmul(hidden, weight32.T)
    if bias32 is not None:
        logits += bias32
    return logits / temperature


def _chunk_log_probs(hidden: torch.Tensor, weight32: torch.Tensor, bias32: torch.Tensor | None,
                     temperature: float) -> torch.Tensor:
    return torch.log_softmax(_chunk_logits(hidden, weight32, bias32, temperature), dim=-1)


def head_logprobs(positions: torch.Tensor, head: Any, targets: torch.Tensor, sampling: float | SamplingTransform,
                  chunk_tokens: int = CHUNK_TOKENS, seen: SeenTokens | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs of `targets`, entropies) from the hidden states `positions` (n, hidden) through `head`.

    A plain Linear head (tied or not, frozen or trained) runs in the recomputing fp32 function above.
    Any other head (peft's LoRA on lm_head, modules_to_save wrappers) runs as its own module, each
    chunk under activation checkpointing so that it too keeps no (tokens, vocab) tensor for backward.
    `sampling`: a temperature, or the sampler's whole transformation (`seen` for a repetition penalty).
    """
    if not isinstance(sampling, SamplingTransform):
        sampling = SamplingTransform(temperature=float(sampling))
    if positions.shape[0] == 0:
        empty = positions.new_zeros(0, dtype=torch.float32)
        return empty, empty
    if type(head) is torch.nn.Linear:
        return _ChunkedHeadLogprobs.apply(positions, head.weight, head.bias, targets, sampling, seen, chunk_tokens)
    from torch.utils.checkpoint import checkpoint

    def chunk_logp(hidden: torch.Tensor, chunk_targets: torch.Tensor, seen_mask: torch.Tensor | None) -> torch.Tensor:
        return processed_log_probs(head(hidden).float(), sampling, seen_mask, chunk_targets)[0]

    logps, entropies = [], []
    for start in range(0, positions.shape[0], chunk_tokens):
        chunk = slice(start, start + chunk_tokens)
        hidden, chunk_targets = positions[chunk], targets[chunk]
        seen_mask = seen.mask(chunk) if seen is not None else None
        logps.append(checkpoint(chunk_logp, hidden, chunk_targets, seen_mask, use_reentrant=False))
        with torch.no_grad():
            entropies.append(processed_log_probs(head(hidden).float(), sampling, seen_mask, chunk_targets)[1])
    return torch.cat(logps), torch.cat(entropies)


class LossPositionLogprobs(torch.nn.Module):
    """token_logprobs as a module's forward, so that FSDP2 sees one root forward per micro-batch (its
    hooks gather the embeddings, final norm and LM head, which the decoder and the head share when
    the embeddings are tied)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
                temperature: float = 1.0, prefix_len: int = 0, loss_index: torch.Tensor | None = None,
                padded: bool | None = None, sampling: SamplingTransform | None = None,
                position_ids: torch.Tensor | None = None, document_lengths: tuple[int, ...] | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return token_logprobs(self.model, input_ids, attention_mask, loss_mask, temperature, prefix_len,
                              loss_index, padded, sampling, position_ids, document_lengths)
