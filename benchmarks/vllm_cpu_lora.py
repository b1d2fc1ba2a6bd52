"""vLLM-on-CPU generation speed with a LoRA adapter: vLLM's own torch LoRA ops against prime's fast path.

    .venv/bin/python benchmarks/vllm_cpu_lora.py [--requests 32 --max-tokens 48 --cores 0]

Starts `prime serve --lora policy=ADAPTER` twice on the embedded SmolLM2 (PRIME_VLLM_FAST_LORA=0, then
=1), sends the same concurrent chat requests (temperature 0, fixed prompts) through the adapter and,
as the reference, through the base model, and prints completion tokens/s for each and the ratio.
The adapter is a fresh peft LoRA (r8, all linear layers) with random B, so the LoRA math really runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prime_cli.serve.embedded import EMBEDDED_NAME, ensure_embedded_model  # noqa: E402
from prime_cli.serve.paths import models_dir  # noqa: E402
from prime_cli.serve.server import free_port  # noqa: E402

PROMPT = "Reverse the text character by character: {i} quiet rivers carry old stones toward the sea."


def make_adapter(folder: Path, model_path: Path) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_path),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.01)
    model.save_pretrained(folder)
    return folder


def chat(url: str, model: str, i: int, max_tokens: int) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT.format(i=i)}], "max_tokens": max_tokens,
            "temperature": 0.0, "ignore_eos": True}
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=900).read())["usage"]["completion_tokens"]


def throughput(url: str, model: str, requests: int, max_tokens: int) -> float:
    chat(url, model, -1, 4)  # warm-up
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(requests) as pool:
        tokens = sum(pool.map(lambda i: chat(url, model, i, max_tokens), range(requests)))
    return tokens / (time.perf_counter() - started)


def measure(adapter: Path, fast: bool, args) -> dict[str, float]:
    port = free_port()
    env = {**os.environ, "PRIME_VLLM_FAST_LORA": "1" if fast else "0", "PRIME_CACHE_DIR": tempfile.mkdtemp()}
    os.symlink(models_dir(), Path(env["PRIME_CACHE_DIR"]) / "models")
    if args.cores:
        env["VLLM_CPU_OMP_THREADS_BIND"] = args.cores
    proc = subprocess.Popen([sys.executable, "-m", "prime_cli", "serve", "--port", str(port), "--max-lora-rank", "8",
                             "--lora", f"policy={adapter}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for line in proc.stdout:
            if line.strip() == url:
                break
        else:
            raise SystemExit("prime serve did not start")
        return {"lora": throughput(url, "policy", args.requests, args.max_tokens),
                "base": throughput(url, EMBEDDED_NAME, args.requests, args.max_tokens)}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--cores", default="", help="VLLM_CPU_OMP_THREADS_BIND for the server (default: all)")
    args = parser.parse_args()
    model_path = Path(ensure_embedded_model())
    with tempfile.TemporaryDirectory() as tmp:
        adapter = make_adapter(Path(tmp) / "adapter", model_path)
        vllm_ops = measure(adapter, False, args)
        fast_ops = measure(adapter, True, args)
    print(f"{args.requests} concurrent requests x {args.max_tokens} tokens, completion tokens/s")
    print(f"{'':24}{'vLLM torch ops':>16}{'prime fast path':>17}{'ratio':>8}")
    print(f"{'through the adapter':24}{vllm_ops['lora']:16.1f}{fast_ops['lora']:17.1f}{fast_ops['lora'] / vllm_ops['lora']:8.2f}")
    print(f"{'base model, same server':24}{vllm_ops['base']:16.1f}{fast_ops['base']:17.1f}{fast_ops['base'] / vllm_ops['base']:8.2f}")


if __name__ == "__main__":
    main()
