"""Two data-parallel trainer ranks (torchrun, gloo on CPU), with the base model sharded (FSDP2) or
replicated, take the same steps as one process; a sharded run's checkpoint resumes in one process.
Mixture-of-Experts models too: FSDP2 shards the fused expert weights that peft's parameter wrappers
adapt, and the expert adapters come out the same."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import (  # noqa: E402
    make_group_samples,
    make_samples,
    tiny_config,
    tiny_model,
    tiny_moe_model,
    write_batch,
)

from prime_lora.trainer.loop import train  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def adapter(out: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "weights" / f"step_{step}" / "adapter_model.safetensors"))


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a), max(float((a[k] - b[k]).abs().max()) for k in a)
    assert any(float(a[k].abs().max()) > 0 for k in a if "lora_B" in k)


# top_k / top_p / min_p / repetition_penalty: the sharded LM head applies the sampler's transformation
TRUNCATED = {"orchestrator.sampling.top_k": 20, "orchestrator.sampling.top_p": 0.95, "orchestrator.sampling.min_p": 0.01,
             "orchestrator.sampling.repetition_penalty": 1.3}


# the adapters of both fused expert weights of every layer (peft's nesting: experts.base_layer is gate_up_proj)
EXPERT_ADAPTERS = {f"base_model.model.model.layers.{layer}.mlp.experts.{wrapper}lora_{ab}.weight"
                   for layer in (0, 1) for wrapper in ("base_layer.", "") for ab in "AB"}


@pytest.fixture
def one_thread():
    """The in-process run computes with one thread, as each rank does (OMP_NUM_THREADS=1): CPU matmuls
    split their sums by thread count, and AdamW's first step turns a gradient element near its eps
    (an expert that saw few tokens) into a visibly different update (1.6e-5 on the tiny Mixtral)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("fsdp", "sampling", "moe"),
                         [(True, {}, None), (False, {}, None), (True, TRUNCATED, None), (True, {}, "mixtral"),
                          (True, {}, "qwen3_moe")],
                         ids=["fsdp", "replicas", "fsdp-truncated-sampling", "fsdp-mixtral", "fsdp-qwen3-moe"])
def test_two_ranks_match_one_process(tmp_path, monkeypatch, one_thread, fsdp, sampling, moe):
    # all on the CPU in fp32 (gloo), also where GPUs are present: CUDA hidden from the ranks, and the
    # in-process runs (device and dtype from torch.cuda.is_available) told there is none
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model_path = tiny_moe_model(tmp_path / "tiny", moe) if moe else tiny_model(tmp_path / "tiny")
    single, ranks = tmp_path / "single", tmp_path / "ranks"
    # a group of 3 sharing a prompt (micro-batches of 2 and 1, on the prompt's KV cache) and 2 loners
    # (one micro-batch): the ranks get 2 and 1, so a sharded rank runs an uncounted pass
    overrides = {"trainer.micro_batch_size": 2, "trainer.model.lora.dropout": 0.0, "trainer.model.fsdp": fsdp,
                 **sampling}
    for out in (single, ranks):
        for step in (1, 2):
            write_batch(out, step, make_group_samples(20 + step, groups=1, per_group=3) + make_samples(30 + step, count=2))
    train(tiny_config(single, **overrides), single, model_path, None)
    (ranks / "config.json").write_text(tiny_config(ranks, **overrides).model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           "-m", "prime_lora.trainer", "--config", str(ranks / "config.json"), "--model-path", model_path],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 data-parallel ranks" in proc.stdout
    assert ("FSDP2" in proc.stdout) == fsdp
    for step in (1, 2):
        assert_same(adapter(single, step), adapter(ranks, step))
    if moe:  # the compared adapters include every expert's, and they trained
        assert EXPERT_ADAPTERS <= adapter(ranks, 2).keys()
        assert all(float(adapter(ranks, 2)[k].abs().max()) > 0 for k in EXPERT_ADAPTERS if "lora_B" in k)
    assert (ranks / "checkpoints" / "step_2" / "trainer" / "rng_rank1.pt").exists()
    assert len((ranks / "metrics.jsonl").read_text().splitlines()) == 2  # written once, by rank 0
    if fsdp:  # the sharded run's step-1 checkpoint, resumed in one process, gives the same step 2
        resumed = tmp_path / "resumed"
        shutil.copytree(ranks, resumed)
        shutil.rmtree(resumed / "weights" / "step_2")
        train(tiny_config(resumed, **overrides), resumed, model_path, 1)
        assert_same(adapter(single, 2), adapter(resumed, 2))
