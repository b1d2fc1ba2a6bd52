"""Per-token log-probabilities of the sampled tokens, computed only where the loss needs them.

The LM head runs on the hidden states of loss positions only, in chunks, so a long prompt or a big
vocabulary does not materialise a (batch, seq, vocab) tensor. The head's matmul runs in fp32 (hidden
states and weight cast before it, as the sampler's fp32 logits), and backward recomputes each chunk's
logits from the saved hidden states instead of keeping every chunk's (tokens, vocab) fp32 log-softmax:
saved memory is tokens x hidden, not tokens x vocab x 4 bytes (~5 GB at 8k tokens of Qwen3).
"""

from __future__ import annotations

from typing import Any

import torch

CHUNK_TOKENS = 1024


def inner_model_and_head(model: Any) -> tuple[Any, Any]:
    """(the decoder stack returning hidden states, the LM head) under peft's wrappers."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    return causal_lm.get_decoder() if hasattr(causal_lm, "get_decoder") else causal_lm.model, causal_lm.get_output_embeddings()


def token_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
                   temperature: float = 1.0, prefix_len: int = 0, loss_index: torch.Tensor | None = None,
                   padded: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropies of the tokens where loss_mask is 1, as flat tensors in row-major order.

    Token i is predicted from position i-1, so loss_mask[:, 0] is ignored. With prefix_len > 0 every
    row starts with the same prefix_len tokens and has no loss token among them: the prefix runs once
    (batch 1) and the rest of the rows run on its KV cache; gradients flow back through the cache.
    `loss_index` and `padded` (MicroBatch's, known on the host) spare two device-to-host syncs.
    """
    decoder, head = inner_model_and_head(model)
    if padded is None:
        padded = not bool(attention_mask.all())
    if not padded:
        attention_mask = None  # plain causal attention (flash kernels, no n^2 mask)
    start = max(prefix_len, 1)  # the first token a position in `predicting` predicts
    if loss_index is None:
        loss_index = loss_mask[:, start:].flatten().nonzero().squeeze(1)
    if prefix_len > 0:
        prefix = decoder(input_ids=input_ids[:1, :prefix_len], use_cache=True)
        cache = prefix.past_key_values
        cache.batch_repeat_interleave(input_ids.shape[0])
        rest = decoder(input_ids=input_ids[:, prefix_len:], attention_mask=attention_mask, past_key_values=cache,
                       use_cache=True).last_hidden_state
        last = prefix.last_hidden_state[:, -1:].expand(input_ids.shape[0], 1, -1)
        predicting = torch.cat([last, rest[:, :-1]], dim=1)  # hidden states predicting tokens prefix_len..
    else:
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        predicting = hidden[:, :-1]  # predicting tokens 1..
    rows, columns = loss_index // predicting.shape[1], loss_index % predicting.shape[1]
    positions = predicting[rows, columns]  # (n, hidden)
    targets = input_ids[:, start:][rows, columns]  # (n,)
    return head_logprobs(positions, head, targets, temperature)


class _ChunkedHeadLogprobs(torch.autograd.Function):
    """log_softmax(hidden @ weight.T + bias) / T at `targets`, chunk by chunk in fp32, and the
    entropies (no gradient). Saves the inputs only; backward recomputes the chunks' probabilities."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk_tokens):
        weight32 = weight.float()
        bias32 = bias.float() if bias is not None else None
        logps, entropies = [], []
        for start in range(0, hidden.shape[0], chunk_tokens):
            log_probs = _chunk_log_probs(hidden[start:start + chunk_tokens], weight32, bias32, temperature)
            logps.append(log_probs.gather(-1, targets[start:start + chunk_tokens, None]).squeeze(-1))
            entropies.append(-(log_probs.exp() * log_probs).sum(-1))
            del log_probs
        ctx.save_for_backward(hidden, weight, bias, targets)
        ctx.temperature, ctx.chunk_tokens = temperature, chunk_tokens
        entropy = torch.cat(entropies)
        ctx.mark_non_differentiable(entropy)
        return torch.cat(logps), entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        hidden, weight, bias, targets = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        weight32 = weight.float()
        bias32 = bias.float() if bias is not None else None
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        grad_weight = torch.zeros_like(weight32) if need_weight else None
        grad_bias = torch.zeros_like(bias32) if need_bias else None
        for start in range(0, hidden.shape[0], ctx.chunk_tokens):
            chunk = slice(start, start + ctx.chunk_tokens)
            # d logp[t] / d logits = onehot(t) - softmax, through the 1 / temperature
            grad_logits = torch.softmax(_chunk_logits(hidden[chunk], weight32, bias32, ctx.temperature), -1)
            grad_logits.neg_().scatter_add_(-1, targets[chunk, None], torch.ones_like(grad_logits[:, :1]))
            grad_logits.mul_(grad_logp[chunk, None].float() / ctx.temperature)
            if need_hidden:
                grad_hidden[chunk] = (grad_logits @ weight32).to(hidden.dtype)
            if need_weight:
                grad_weight.addmm_(grad_logits.T, hidden[chunk].float())
            if need_bias:
                grad_bias += grad_logits.sum(0)
        return (grad_hidden, grad_weight.to(weight.dtype) if need_weight else None,
                grad_bias.to(bias.dtype) if need_bias else None, None, None, None)


def _chunk_logits(hidden: torch.Tensor, weight32: torch.Tensor, bias32: torch.Tensor | None,
                  temperature: float) -> torch.Tensor:
    logits = hidden.float() @ weight32.T
    if bias32 is not None:
        logits += bias32
    return logits / temperature


def _chunk_log_probs(hidden: torch.Tensor, weight32: torch.Tensor, bias32: torch.Tensor | None,
                     temperature: float) -> torch.Tensor:
    return torch.log_softmax(_chunk_logits(hidden, weight32, bias32, temperature), dim=-1)


def head_logprobs(positions: torch.Tensor, head: Any, targets: torch.Tensor, temperature: float,
                  chunk_tokens: int = CHUNK_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs of `targets`, entropies) from the hidden states `positions` (n, hidden) through `head`.

    A plain Linear head (tied or not, frozen or trained) runs in the recomputing fp32 function above.
    Any other head (peft's LoRA on lm_head, modules_to_save wrappers) runs as its own module, each
    chunk under activation checkpointing so that it too keeps no (tokens, vocab) tensor for backward.
    """
    if positions.shape[0] == 0:
        empty = positions.new_zeros(0, dtype=torch.float32)
        return empty, empty
    if type(head) is torch.nn.Linear:
        return _ChunkedHeadLogprobs.apply(positions, head.weight, head.bias, targets, temperature, chunk_tokens)
    from torch.utils.checkpoint import checkpoint

    def chunk_logp(hidden: torch.Tensor, chunk_targets: torch.Tensor) -> torch.Tensor:
        log_probs = torch.log_softmax(head(hidden).float() / temperature, dim=-1)
        return log_probs.gather(-1, chunk_targets[:, None]).squeeze(-1)

    logps, entropies = [], []
    for start in range(0, positions.shape[0], chunk_tokens):
        hidden, chunk_targets = positions[start:start + chunk_tokens], targets[start:start + chunk_tokens]
        logps.append(checkpoint(chunk_logp, hidden, chunk_targets, use_reentrant=False))
        with torch.no_grad():
            log_probs = torch.log_softmax(head(hidden).float() / temperature, dim=-1)
            entropies.append(-(log_probs.exp() * log_probs).sum(-1))
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
                padded: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return token_logprobs(self.model, input_ids, attention_mask, loss_mask, temperature, prefix_len,
                              loss_index, padded)
