"""Trainer-only throughput of the prime-lora trainer on synthetic batches (no vLLM, no environment).

    .venv/bin/python benchmarks/trainer_bench.py [--model qwen3-0.6b|qwen3-4b|smollm2-135m|qwen3-30b-a3b|qwen3-moe-tiny]
        [--shape single|rl]
        [--seq-len 16384] [--samples 32 --min-len 256 --max-len 4096 --prompt-len 200]
        [--steps 5] [--rank 16] [--ac | --no-ac] [--set trainer.key=value ...] [--json out.json]
        [--variant 'LABEL:trainer.key=value,...' ...] [--no-unpacked] [--no-sft] [--no-peer] [--model-dir DIR]

The model is built from its architecture config with random weights (nothing is downloaded), wrapped
with a LoRA adapter on every linear projection, and trained with the real training step
(prime_lora.trainer.step.train_step: packing, chunked loss-position log-probs, the importance-ratio
loss, clipping, AdamW). Shapes:
- `single`: one sample of seq_len tokens per step, every token after the first a loss token (as
  prime-rl's trainer benchmark);
- `rl`: --samples samples per step, lengths drawn uniformly from [--min-len, --max-len], each starting
  with a prompt of --prompt-len tokens (at most half the sample) without loss, as RL batches are.

In one run it times, on the same batches: ours at the default settings; for `rl`, ours without
packing (`trainer.pack = false`: micro_batch_size samples padded to the longest, the step before
packing; --no-unpacked leaves it out); ours as an SFT step (`sft`: the cross-entropy of the same loss
tokens at temperature 1, prime_lora/trainer/sft_loss.py; --no-sft leaves it out), whose gain over the RL
step is printed as a ratio of the two steps' times (one policy stepped alternately as RL and as SFT, on
the same batches); each --variant, ours with those overrides (e.g.
`varlen:trainer.model.attention=varlen`, `eager:trainer.model.compile=false`); and a plain
transformers + peft step (the full logits in the model's dtype, log_softmax,
the same loss; HF gradient checkpointing when --ac), the same-run peer. tokens/s counts real tokens
(no padding). MFU counts prime-rl's LoRA FLOPs per token (prime_lora.trainer.flops) against the GPU's
dense bf16 peak (--peak-tflops, default H100 SXM 989); prime-rl takes hidden_size / heads as the
attention head size (64 on Qwen3-0.6B, whose head_dim is 128), so `mfu_prime_rl_heads` repeats the
MFU with that convention, the one its published numbers use. Memory: torch.cuda.max_memory_reserved
on CUDA, not reported on CPU. Reference (prime-rl's published trainer-only numbers, one H100, LoRA r16,
seq_len 16k, FA3): Qwen3-0.6B 13.3k tokens/s, MFU 10.9%, 5.1 GiB; Qwen3-4B 6.2k tokens/s, MFU 21.7%, 23.3 GiB.

Mixture-of-Experts shapes (`qwen3-30b-a3b`, the public config; `qwen3-moe-tiny`, a few layers for the CPU)
are built in memory on the device, never written to disk (30B-A3B's bf16 weights are 61 GB), and adapted
as the trainer adapts MoE models (attention and every expert's gate_up/down, prime_cli/train/lora_targets.py),
with the experts on transformers' grouped GEMM (trainer.model.experts_implementation; try
`--variant eager:trainer.model.experts_implementation=eager`). MFU is left out for them (flops.py counts
dense models). prime-rl's published LoRA r16, 16k-token row for Qwen3-30B-A3B: 33.1k tokens/s on 8 H100s,
about 4.1k per GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "plugins" / "prime-lora")]

from prime_cli.train.model_facts import PUBLIC_CONFIGS  # noqa: E402

QWEN3_30B_A3B = {k: v for k, v in PUBLIC_CONFIGS["qwen/qwen3-30b-a3b"].items() if k not in ("architectures", "model_type")}
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
    "qwen3-30b-a3b": dict(kind="qwen3_moe", **QWEN3_30B_A3B),
    # 30B-A3B's proportions (head_dim 128, 4 KV heads; 8 of the experts active) at CPU size
    "qwen3-moe-tiny": dict(kind="qwen3_moe", **{**QWEN3_30B_A3B, "hidden_size": 256, "moe_intermediate_size": 128,
                                                "intermediate_size": 768, "num_hidden_layers": 4,
                                                "num_attention_heads": 4, "num_key_value_heads": 2,
                                                "num_experts": 32, "vocab_size": 8192,
                                                "max_position_embeddings": 4096}),
}
MOE_KINDS = ("qwen3_moe",)
REFERENCE = {"qwen3-0.6b": "prime-rl (published, one 16k sequence): 13.3k tok/s, MFU 10.9%, 5.1 GiB",
             "qwen3-4b": "prime-rl (published, one 16k sequence): 6.2k tok/s, MFU 21.7%, 23.3 GiB",
             "qwen3-30b-a3b": "prime-rl (published, LoRA r16, 16k tokens, 8 H100s): 33.1k tok/s, about 4.1k per GPU"}


def is_moe(name: str) -> bool:
    return SHAPES[name]["kind"] in MOE_KINDS


def random_base(name: str, device: Any, dtype: Any) -> Any:
    """An MoE model with random weights, built in memory straight on `device` in `dtype`."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    shape = dict(SHAPES[name])
    shape.pop("kind")
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(Qwen3MoeConfig(**shape), dtype=dtype)


def build_model_folder(name: str, folder: Path) -> Path:
    """The model's folder with random bf16 weights; kept and reused when it is already there (--model-dir).
    The weights are drawn on the GPU where there is one (a 4B model's CPU init takes a minute)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if (folder / "config.json").exists():
        return folder
    shape = dict(SHAPES[name])
    kind = shape.pop("kind")
    config_cls, model_cls = (Qwen3Config, Qwen3ForCausalLM) if kind == "qwen3" else (LlamaConfig, LlamaForCausalLM)
    torch.manual_seed(0)
    with torch.device("meta"):
        model_cls(config_cls(**shape))  # fail fast on a bad shape before allocating
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = model_cls(config_cls(**shape)).to(torch.bfloat16)
    model.save_pretrained(folder.with_name(folder.name + ".partial"))
    folder.with_name(folder.name + ".partial").rename(folder)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return folder


def synthetic_sample(seq_len: int, vocab: int, generator: Any, prompt_len: int = 0) -> dict:
    """Random tokens; every token after the prompt is a loss token (the first one has no prediction)."""
    import torch

    ids = torch.randint(0, vocab, (seq_len,), generator=generator).tolist()
    mask = [0] * prompt_len + [1] * (seq_len - prompt_len)
    # a random model's log-prob of a random token is near -log(vocab): the importance ratios stay within the
    # band, so the RL step trains on its tokens (a fixed -11.9, Qwen3's log(151936), masked them all on a
    # smaller vocabulary and left the RL step with zero gradients)
    old = -math.log(vocab)
    return {"input_ids": ids, "loss_mask": mask,
            "inference_logprobs": [0.0 if not m or i == 0 else old for i, m in enumerate(mask)], "advantage": 1.0}


def make_batches(args: argparse.Namespace, vocab: int) -> list[list[dict]]:
    """One batch per step (the warm-up included), the same for every variant."""
    import torch

    generator = torch.Generator().manual_seed(0)
    if args.shape == "single":
        return [[synthetic_sample(args.seq_len, vocab, generator)] for _ in range(args.steps + 1)]
    batches = []
    for _ in range(args.steps + 1):
        lengths = torch.randint(args.min_len, args.max_len + 1, (args.samples,), generator=generator).tolist()
        batches.append([synthetic_sample(n, vocab, generator, min(args.prompt_len, n // 2)) for n in lengths])
    return batches


SFT_VARIANT = "ours, sft"
SFT_DATA = {"type": "dataset_sft", "dataset": {"source": [{"dataset": "bench.jsonl"}]}}  # never read: batches are given


def bench_config(args: argparse.Namespace, overrides: dict[str, Any], sft: bool = False) -> Any:
    from prime_cli.train.config import RLConfig
    from prime_cli.train.overrides import apply_overrides

    data = {"seq_len": args.seq_len, "max_steps": args.steps + 1,
            "inference": {"model": {"max_model_len": args.seq_len}},
            "trainer": {"model": {"lora": {"rank": args.rank, "alpha": 2 * args.rank},
                                  "ac": {"freq": 1} if args.ac else None}},
            "orchestrator": {"batch_size": 8, "env": [{"id": "bench"}], **({"algo": SFT_DATA} if sft else {})}}
    apply_overrides(data, [f"{k}={v}" for k, v in {**args.set, **overrides}.items()])
    return RLConfig.model_validate(data)


def time_steps(step: Any, batches: list[list[dict]], device: Any) -> float:
    """Median seconds of the timed steps (the first warms up kernels and allocators)."""
    import torch

    times = []
    for index, batch in enumerate(batches):  # the first step warms up (compilation, allocator, autotuning)
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if index:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def ours(args: argparse.Namespace, folder: Path, overrides: dict[str, Any], device: Any) -> Any:
    """The prime-lora training step, as `prime train` runs it."""
    config = bench_config(args, overrides)
    model, step = policy_steps(args, folder, config, device)
    return model, lambda batch: step(batch, config)


def policy_steps(args: argparse.Namespace, folder: Path, config: Any, device: Any) -> Any:
    """(the policy, step(batch, config): one training step of it under `config`)."""
    from prime_lora.trainer.model import build_policy, pick_dtype, trainable_parameters
    from prime_lora.trainer.optim import build_optimizer, build_scheduler
    from prime_lora.trainer.step import train_step

    dtype = pick_dtype(config, device)
    base = random_base(args.model, device, dtype) if is_moe(args.model) else None
    model = build_policy(config, str(folder), device, dtype, base=base)
    params = trainable_parameters(model)
    optimizer = build_optimizer(params, config)
    scheduler = build_scheduler(optimizer, config)
    return model, lambda batch, config: train_step(model, optimizer, scheduler, params, batch, config, device, pad_id=0)


def measure_sft(args: argparse.Namespace, folder: Path, batches: list[list[dict]], device: Any) -> tuple[dict, dict]:
    """The SFT step against the RL step on one policy: each batch runs both, in alternating order, so that a
    shared machine's load changes weigh on both alike. Returns the SFT row and the pair's figures: the median
    of each pair's RL time / SFT time (> 1: SFT is faster)."""
    import gc

    import torch

    rl_config, sft_config = bench_config(args, {}), bench_config(args, {}, sft=True)
    assert sft_config.is_sft and not rl_config.is_sft
    model, step = policy_steps(args, folder, rl_config, device)
    times: dict[str, list[float]] = {"rl": [], "sft": []}
    for index, batch in enumerate(batches):  # the first pair warms up
        for kind in ("rl", "sft") if index % 2 else ("sft", "rl"):
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            step(batch, sft_config if kind == "sft" else rl_config)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if index:
                times[kind].append(time.perf_counter() - started)
    del model, step
    gc.collect()
    seconds = statistics.median(times["sft"])
    real_tokens = statistics.fmean(sum(len(s["input_ids"]) for s in batch) for batch in batches[1:])
    row = {"variant": SFT_VARIANT, "step_s": seconds, "tokens_per_s": real_tokens / seconds,
           "tokens_per_step": real_tokens}
    ratio = statistics.median(r / s for r, s in zip(times["rl"], times["sft"], strict=True))
    print(f"  {SFT_VARIANT}: {row['tokens_per_s']:,.0f} tokens/s, {seconds:.2f} s/step; RL step / SFT step "
          f"{ratio:.3f} (median of {len(times['sft'])} pairs)", file=sys.stderr, flush=True)
    return row, {"sft_speedup_over_rl": ratio, "sft_pairs": len(times["sft"]),
                 "rl_step_s_paired": statistics.median(times["rl"])}


def hf_peft(args: argparse.Namespace, folder: Path, device: Any) -> Any:
    """A plain transformers + peft step on the same batches: padded micro-batches, full logits."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from prime_lora.trainer.batches import loss_token_count, padded_batches
    from prime_lora.trainer.loss import policy_loss
    from prime_lora.trainer.model import pick_dtype

    config = bench_config(args, {})
    dtype = pick_dtype(config, device)
    if is_moe(args.model):
        base = random_base(args.model, device, dtype)
        base.set_attn_implementation("sdpa")
    else:
        base = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa")
    lora = config.trainer.model.lora
    model = get_peft_model(base, LoraConfig(r=lora.rank, lora_alpha=lora.alpha, target_modules=list(lora.target_modules),
                                            task_type="CAUSAL_LM")).to(device)
    if args.ac:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.trainer.optim.lr)

    def step(batch: list[dict]) -> None:
        total = loss_token_count(batch)
        for mb in padded_batches(batch, config.trainer.micro_batch_size, 0, device):
            logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits[:, :-1]
            logp = torch.log_softmax(logits.float(), -1).gather(-1, mb.input_ids[:, 1:, None]).squeeze(-1)
            logp = logp.flatten()[mb.loss_index]
            policy_loss(logp, mb.inference_logprobs, mb.advantages, config.trainer.loss, total).loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return model, step


def measure(name: str, build: Any, args: argparse.Namespace, batches: list[list[dict]], device: Any) -> dict:
    import gc

    import torch

    from prime_lora.trainer.flops import lora_flops_per_token, lora_parameter_count

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model, step = build()
    seconds = time_steps(step, batches, device)
    real_tokens = statistics.fmean(sum(len(s["input_ids"]) for s in batch) for batch in batches[1:])
    result = {"variant": name, "step_s": seconds, "tokens_per_s": real_tokens / seconds, "tokens_per_step": real_tokens}
    if device.type == "cuda" and not is_moe(args.model):
        shape = SimpleNamespace(**SHAPES[args.model])
        lora_params, other = lora_parameter_count(model)
        for key, head_dim in (("mfu", None), ("mfu_prime_rl_heads", shape.hidden_size // shape.num_attention_heads)):
            flops = statistics.fmean(sum(len(s["input_ids"]) * lora_flops_per_token(
                shape, lora_params, len(s["input_ids"]), other, attention_head_dim=head_dim) for s in batch)
                for batch in batches[1:])
            result[key] = flops / seconds / (args.peak_tflops * 1e12)
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_reserved() / 2**30
    del model, step
    gc.collect()
    print(f"  {name}: {result['tokens_per_s']:,.0f} tokens/s, {seconds:.2f} s/step", file=sys.stderr, flush=True)
    return result


def parse_sets(values: list[str]) -> dict[str, str]:
    pairs = [v.split("=", 1) for v in values]
    if any(len(p) != 2 for p in pairs):
        raise SystemExit("--set takes key=value")
    return dict(pairs)


def parse_variant(value: str) -> tuple[str, dict[str, str]]:
    """'LABEL:key=value,key=value' -> (LABEL, {key: value})."""
    label, _, sets = value.partition(":")
    if not label or not sets:
        raise SystemExit(f"--variant takes LABEL:key=value[,key=value] (got {value!r})")
    return label, parse_sets(sets.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="qwen3-0.6b")
    parser.add_argument("--shape", choices=["single", "rl"], default="single")
    parser.add_argument("--seq-len", type=int, default=16384, help="single: the sample's length; rl: the trainer's seq_len")
    parser.add_argument("--samples", type=int, default=32, help="rl: samples per step")
    parser.add_argument("--min-len", type=int, default=256, help="rl: shortest sample")
    parser.add_argument("--max-len", type=int, default=4096, help="rl: longest sample")
    parser.add_argument("--prompt-len", type=int, default=200, help="rl: prompt tokens without loss (at most half a sample)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (after one warm-up step)")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--ac", action=argparse.BooleanOptionalAction, default=True, help="activation checkpointing")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for our step, e.g. --set trainer.micro_batch_size=4")
    parser.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the plain transformers + peft step")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL:KEY=VALUE[,KEY=VALUE]",
                        help="also time ours with these overrides, e.g. varlen:trainer.model.attention=varlen")
    parser.add_argument("--unpacked", action=argparse.BooleanOptionalAction, default=True,
                        help="rl: also time ours without packing")
    parser.add_argument("--sft", action=argparse.BooleanOptionalAction, default=True,
                        help="also time ours as an SFT step on the same samples")
    parser.add_argument("--model-dir", type=Path, help="keep the random-weight model here and reuse it")
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.set = parse_sets(args.set)
    args.variant = [parse_variant(v) for v in args.variant]
    if args.shape == "rl" and not 2 <= args.min_len <= args.max_len <= args.seq_len:
        parser.error(f"--shape rl needs 2 <= --min-len <= --max-len <= --seq-len (got {args.min_len}, "
                     f"{args.max_len}, {args.seq_len})")

    import torch

    from prime_lora.trainer.model import pick_device

    device = pick_device()
    batches = make_batches(args, SHAPES[args.model]["vocab_size"])
    with tempfile.TemporaryDirectory() as tmp:
        folder = (args.model_dir or Path(tmp)) / args.model
        if not is_moe(args.model):  # MoE shapes are built in memory by each variant
            build_model_folder(args.model, folder)
        variants = [("ours", lambda: ours(args, folder, {}, device))]
        if args.shape == "rl" and args.unpacked:
            variants.append(("ours, unpacked", lambda: ours(args, folder, {"trainer.pack": "false"}, device)))
        for label, sets in args.variant:
            variants.append((f"ours, {label}", lambda sets=sets: ours(args, folder, sets, device)))
        if args.peer:
            variants.append(("transformers + peft", lambda: hf_peft(args, folder, device)))
        results = [measure(name, build, args, batches, device) for name, build in variants]
        sft_row, sft_figures = measure_sft(args, folder, batches, device) if args.sft else (None, {})
        if sft_row is not None:
            results.insert(1, sft_row)
    report = {"model": args.model, "shape": args.shape, "device": torch.cuda.get_device_name() if device.type == "cuda"
              else "cpu", "seq_len": args.seq_len, "lora_rank": args.rank, "ac": args.ac, "overrides": args.set,
              **({"samples": args.samples, "min_len": args.min_len, "max_len": args.max_len,
                  "prompt_len": args.prompt_len} if args.shape == "rl" else {}),
              **{k: v for k, v in results[0].items() if k != "variant"}, "variants": results, **sft_figures}
    print(json.dumps(report))
    print_table(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def print_table(report: dict) -> None:
    shape = (f"one {report['seq_len']}-token sequence" if report["shape"] == "single" else
             f"{report['samples']} samples of {report['min_len']}-{report['max_len']} tokens")
    print(f"{report['model']} on {report['device']}, {shape}, LoRA r{report['lora_rank']}, "
          f"AC {'on' if report['ac'] else 'off'} (real tokens only)")
    base = report["variants"][0]["tokens_per_s"]
    for row in report["variants"]:
        extra = (f"  MFU {row['mfu'] * 100:.1f}% ({row['mfu_prime_rl_heads'] * 100:.1f}% as prime-rl counts)"
                 if "mfu" in row else "")
        extra += f"  peak {row['peak_memory_gib']:.1f} GiB" if "peak_memory_gib" in row else ""
        print(f"  {row['variant']:<22} {row['tokens_per_s']:>10,.0f} tokens/s  {row['step_s']:7.2f} s/step"
              f"  ours / this = {base / row['tokens_per_s']:.2f}x{extra}")
    if "sft_speedup_over_rl" in report:
        # our RL step reads the old log-probs vLLM returned (no forward of its own for them), so what SFT saves
        # is the importance ratio, its band mask and the mismatch KL on the loss tokens (and a sampler transform)
        print(f"  SFT step vs RL step on one policy, alternating: RL time / SFT time = "
              f"{report['sft_speedup_over_rl']:.3f} (median of {report['sft_pairs']} pairs; SFT computes no importance "
              "ratio, band mask or mismatch KL, and neither step runs a forward for old log-probs)")
    print(f"  {REFERENCE.get(report['model'], 'prime-rl: no published figure for this model')}")


if __name__ == "__main__":
    main()
