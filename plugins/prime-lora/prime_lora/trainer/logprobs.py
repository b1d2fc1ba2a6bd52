"""Per-token log-probabilities of the sampled tokens, computed only where the loss needs them.

The LM head runs on the hidden states of loss positions only, in chunks, so a long prompt or a big
vocabulary does not materialise a (batch, seq, vocab) tensor.
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
                   temperature: float = 1.0, prefix_len: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropies of the tokens where loss_mask is 1, as flat tensors in row-major order.

    Token i is predicted from position i-1, so loss_mask[:, 0] is ignored. With prefix_len > 0 every
    row starts with the same prefix_len tokens and has no loss token among them: the prefix runs once
    (batch 1) and the rest of the rows run on its KV cache; gradients flow back through the cache.
    """
    decoder, head = inner_model_and_head(model)
    if bool(attention_mask.all()):  # no padding: plain causal attention (flash kernels, no n^2 mask)
        attention_mask = None
    if prefix_len > 0:
        prefix = decoder(input_ids=input_ids[:1, :prefix_len], use_cache=True)
        cache = prefix.past_key_values
        cache.batch_repeat_interleave(input_ids.shape[0])
        rest = decoder(input_ids=input_ids[:, prefix_len:], attention_mask=attention_mask, past_key_values=cache,
                       use_cache=True).last_hidden_state
        last = prefix.last_hidden_state[:, -1:].expand(input_ids.shape[0], 1, -1)
        predicting = torch.cat([last, rest[:, :-1]], dim=1)  # hidden states predicting tokens prefix_len..
        targets_mask = loss_mask[:, prefix_len:].bool()
        positions = predicting[targets_mask]
        targets = input_ids[:, prefix_len:][targets_mask]
    else:
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        targets_mask = loss_mask[:, 1:].bool()
        positions = hidden[:, :-1][targets_mask]  # (n, hidden)
        targets = input_ids[:, 1:][targets_mask]  # (n,)
    logps, entropies = [], []
    for start in range(0, positions.shape[0], CHUNK_TOKENS):
        logits = head(positions[start:start + CHUNK_TOKENS]).float() / temperature
        log_probs = torch.log_softmax(logits, dim=-1)
        logps.append(log_probs.gather(-1, targets[start:start + CHUNK_TOKENS, None]).squeeze(-1))
        with torch.no_grad():
            entropies.append(-(log_probs.exp() * log_probs).sum(-1))
    if not logps:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(logps), torch.cat(entropies)


class LossPositionLogprobs(torch.nn.Module):
    """token_logprobs as a module's forward, so that FSDP2 sees one root forward per micro-batch (its
    hooks gather the embeddings, final norm and LM head, which the decoder and the head share when
    the embeddings are tied)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
                temperature: float = 1.0, prefix_len: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        return token_logprobs(self.model, input_ids, attention_mask, loss_mask, temperature, prefix_len)
