"""Trainer-only throughput of the prime-lora trainer on synthetic batches (no vLLM, no environment).

    .venv/bin/python benchmarks/trainer_bench.py [--model qwen3-0.6b|qwen3-4b|smollm2-135m] [--seq-len 16384]
                                                 [--steps 5] [--rank 16] [--ac | --no-ac] [--json out.json]

The model is built from its architecture config with random weights (nothing is downloaded), wrapped
with a LoRA adapter on every linear projection, and trained with the real training step
(prime_lora.trainer.step.train_step: chunked loss-position log-probs, the importance-ratio loss,
clipping, AdamW) on one sample of seq_len tokens per step, every token after the first a loss token
(as prime-rl's trainer benchmark). Reported: tokens/s (every token of the sequence), MFU and peak
reserved memory (torch.cuda.max_memory_reserved, what the allocator holds from the GPU). MFU counts
prime-rl's LoRA FLOPs per token (prime_lora.trainer.flops: 4 x frozen matmul parameters + 6 x LoRA
parameters + 12 x layers x heads x head_dim x seq_len for attention) against the GPU's dense bf16 peak
(--peak-tflops, default H100 SXM 989); on CPU it is not reported. prime-rl's counter takes
hidden_size / heads as the attention head size (64 on Qwen3-0.6B, whose head_dim is 128), so
`mfu_prime_rl_heads` repeats the MFU with that convention, the one its published numbers use.
Reference (prime-rl's published trainer-only numbers, one H100, LoRA r16, seq_len 16k): Qwen3-0.6B
13.3k tokens/s, MFU 10.9%, 5.1 GiB; Qwen3-4B 6.2k tokens/s, MFU 21.7%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "plugins" / "prime-lora")]

SHAPES = {  # architecture configs of the public checkpoints (config.json), used with random weights
    "qwen3-0.6b": dict(kind="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       tie_word_embeddings=True, max_position_embeddings=40960, rope_theta=1000000.0),
    "qwen3-4b": dict(kind="qwen3", hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                     tie_word_embeddings=True, max_position_embeddings=40960, rope_theta=1000000.0),
    "smollm2-135m": dict(kind="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                         tie_word_embeddings=True, max_position_embeddings=8192, rope_theta=100000.0),
}
REFERENCE = {"qwen3-0.6b": "prime-rl: 13.3k tok/s, MFU 10.9%, 5.1 GiB", "qwen3-4b": "prime-rl: 6.2k tok/s, MFU 21.7%"}


def build_model_folder(name: str, folder: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    shape = dict(SHAPES[name])
    kind = shape.pop("kind")
    config_cls, model_cls = (Qwen3Config, Qwen3ForCausalLM) if kind == "qwen3" else (LlamaConfig, LlamaForCausalLM)
    torch.manual_seed(0)
    with torch.device("meta"):
        model_cls(config_cls(**shape))  # fail fast on a bad shape before allocating
    model = model_cls(config_cls(**shape)).to(torch.bfloat16)
    model.save_pretrained(folder)
    return folder


def synthetic_sample(seq_len: int, vocab: int, generator: Any) -> dict:
    """Random tokens, all of them loss tokens (the first one has no prediction)."""
    import torch

    ids = torch.randint(0, vocab, (seq_len,), generator=generator).tolist()
    return {"input_ids": ids, "loss_mask": [1] * seq_len, "inference_logprobs": [0.0] + [-11.9] * (seq_len - 1),
            "advantage": 1.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="qwen3-0.6b")
    parser.add_argument("--seq-len", type=int, default=16384)
    parser.add_argument("--steps", type=int, default=5, help="timed steps (after one warm-up step)")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--ac", action=argparse.BooleanOptionalAction, default=True, help="activation checkpointing")
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    from prime_cli.train.config import RLConfig
    from prime_lora.trainer.flops import lora_flops_per_token, lora_parameter_count
    from prime_lora.trainer.model import build_policy, pick_device, pick_dtype, trainable_parameters
    from prime_lora.trainer.optim import build_optimizer, build_scheduler
    from prime_lora.trainer.step import train_step

    device = pick_device()
    config = RLConfig.model_validate({
        "seq_len": args.seq_len, "max_steps": args.steps + 1, "inference": {"model": {"max_model_len": args.seq_len}},
        "trainer": {"micro_batch_size": 1, "model": {"lora": {"rank": args.rank, "alpha": 2 * args.rank},
                                                     "ac": {"freq": 1} if args.ac else None}},
        "orchestrator": {"batch_size": 8, "env": [{"id": "bench"}]}})
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_model_folder(args.model, Path(tmp) / args.model)
        dtype = pick_dtype(config, device)
        model = build_policy(config, str(folder), device, dtype)
    params = trainable_parameters(model)
    total_params = sum(p.numel() for p in model.parameters())
    optimizer = build_optimizer(params, config)
    scheduler = build_scheduler(optimizer, config)
    lora_params, other_trained = lora_parameter_count(model)
    generator = torch.Generator().manual_seed(0)
    vocab = SHAPES[args.model]["vocab_size"]

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(args.steps + 1):
        batch = [synthetic_sample(args.seq_len, vocab, generator)]
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        train_step(model, optimizer, scheduler, params, batch, config, device, pad_id=0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step:  # step 0 warms up kernels and allocators
            times.append(time.perf_counter() - started)
        print(f"step {step}: {time.perf_counter() - started:.2f} s", file=sys.stderr, flush=True)
    seconds = statistics.median(times)
    tokens_per_s = args.seq_len / seconds
    result = {"model": args.model, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "dtype": str(dtype), "seq_len": args.seq_len, "lora_rank": args.rank, "ac": args.ac,
              "params": total_params, "lora_params": lora_params, "step_s": seconds, "tokens_per_s": tokens_per_s}
    if device.type == "cuda":
        shape = SimpleNamespace(**SHAPES[args.model])
        for key, head_dim in (("mfu", None), ("mfu_prime_rl_heads", shape.hidden_size // shape.num_attention_heads)):
            flops = lora_flops_per_token(shape, lora_params, args.seq_len, other_trained, attention_head_dim=head_dim)
            result[key] = tokens_per_s * flops / (args.peak_tflops * 1e12)
        result["peak_memory_gib"] = torch.cuda.max_memory_reserved() / 2**30
    print(json.dumps(result))
    mfu = (f"MFU {result['mfu'] * 100:.1f}% ({result['mfu_prime_rl_heads'] * 100:.1f}% counted as prime-rl does), "
           f"peak reserved {result['peak_memory_gib']:.1f} GiB" if "mfu" in result else "(CPU: no MFU)")
    print(f"{args.model} on {result['device']}, seq_len {args.seq_len}, LoRA r{args.rank}, AC {'on' if args.ac else 'off'}: "
          f"{tokens_per_s:,.0f} tokens/s, {seconds:.2f} s/step, {mfu}   [{REFERENCE.get(args.model, 'no reference')}]")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
