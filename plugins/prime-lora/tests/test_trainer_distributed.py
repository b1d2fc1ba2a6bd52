"""Two data-parallel trainer ranks (torchrun, gloo on CPU) take the same steps as one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

from prime_lora.trainer.loop import train  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def test_two_ranks_match_one_process(tmp_path):
    from safetensors.torch import load_file

    model_path = tiny_model(tmp_path / "tiny")
    single, ranks = tmp_path / "single", tmp_path / "ranks"
    overrides = {"trainer.micro_batch_size": 1, "trainer.model.lora.dropout": 0.0}
    for out in (single, ranks):
        for step in (1, 2):
            write_batch(out, step, make_samples(20 + step, count=5))
    train(tiny_config(single, **overrides), single, model_path, None)
    (ranks / "config.json").write_text(tiny_config(ranks, **overrides).model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "prime_lora.trainer", "--config", str(ranks / "config.json"), "--model-path", model_path],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 data-parallel ranks" in proc.stdout
    a = load_file(str(single / "weights" / "step_2" / "adapter_model.safetensors"))
    b = load_file(str(ranks / "weights" / "step_2" / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert any(float(a[k].abs().max()) > 0 for k in a if "lora_B" in k)
    assert (ranks / "checkpoints" / "step_2" / "trainer" / "rng_rank1.pt").exists()
    assert len((ranks / "metrics.jsonl").read_text().splitlines()) == 2  # written once, by rank 0
