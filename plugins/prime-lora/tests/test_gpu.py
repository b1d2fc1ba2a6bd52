"""The trainer on CUDA (bf16): runs only where a GPU is present; skipped elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
REPO = Path(__file__).resolve().parents[3]


def test_trainer_steps_in_bf16_on_cuda(tmp_path):
    from prime_lora.trainer.loop import train

    model_path = tiny_model(tmp_path / "tiny")
    out = tmp_path / "run"
    for step in (1, 2):
        write_batch(out, step, make_samples(step, count=6))
    config = tiny_config(out, **{"trainer.model.ac": {"freq": 1}})
    assert train(config, out, model_path, None) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(not r["skipped"] and r["grad_norm"] > 0 for r in rows)
    assert (out / "weights" / "step_2" / "adapter_model.safetensors").exists()


def test_trainer_bench_reports_mfu_and_memory(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "trainer_bench.py"), "--model", "qwen3-0.6b",
                           "--seq-len", "4096", "--steps", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["tokens_per_s"] > 0 and 0 < result["mfu"] < 1 and result["peak_memory_gib"] > 0
    assert 0 < result["mfu_prime_rl_heads"] < result["mfu"]  # it counts half of Qwen3's attention head size


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_gpu_ranks_train_like_one(tmp_path):
    from safetensors.torch import load_file

    from prime_lora.trainer.loop import train

    model_path = tiny_model(tmp_path / "tiny")
    single, ranks = tmp_path / "single", tmp_path / "ranks"
    overrides = {"trainer.micro_batch_size": 1, "trainer.model.lora.dropout": 0.0, "model.dtype": "float32"}
    for out in (single, ranks):
        write_batch(out, 1, make_samples(31, count=4))
    train(tiny_config(single, max_steps=1, **overrides), single, model_path, None)
    (ranks / "config.json").write_text(tiny_config(ranks, max_steps=1, **overrides).model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "prime_lora.trainer", "--config", str(ranks / "config.json"), "--model-path", model_path],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a = load_file(str(single / "weights" / "step_1" / "adapter_model.safetensors"))
    b = load_file(str(ranks / "weights" / "step_1" / "adapter_model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
