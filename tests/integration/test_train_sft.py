"""`prime train` of an SFT config for real, through the installed `prime`: the embedded SmolLM2 fine-tuned on a
tiny JSONL of reverse-text chats (the lead's data file, its few-shot turns of weight 0), no vLLM. Three steps
with a checkpoint each, then `--resume-step 2`: the resumed run trains on exactly the straight run's step-3
batch (the data order's epoch and cursor are in the checkpoint; step 3 crosses into the second epoch)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from tests.evals.cli_support import run_prime

from .conftest import REPO

pytest.importorskip("torch")
DATA = REPO / "configs" / "sft" / "data" / "reverse-text-train.jsonl"
RUN_TIMEOUT_S = 300


def write_config(folder: Path) -> Path:
    rows = DATA.read_text().splitlines()[:5]
    rows.append(json.dumps({"messages": [{"role": "user", "content": "no answer here"}]}))  # counted, not trained
    data = folder / "rows.jsonl"
    data.write_text("\n".join(rows) + "\n")
    config = folder / "sft.toml"
    config.write_text(textwrap.dedent(f"""
        max_steps = 3

        [model]
        name = "local"

        [data]
        seq_len = 512
        batch_size = 2

        [[data.source]]
        dataset = "{data}"

        [trainer.optim]
        lr = 1e-4

        [trainer.model.lora]
        rank = 4
        alpha = 8

        [trainer.ckpt]
        interval = 1
    """))
    return config


def batch(out: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (out / "rollouts" / f"step_{step}" / "batch.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, prime_cache):
    folder = tmp_path_factory.mktemp("sft")
    out = folder / "run"
    proc = run_prime(["train", str(write_config(folder)), "-o", str(out)], REPO,
                     {"PRIME_CACHE_DIR": str(prime_cache)}, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out, proc


def test_an_sft_run_trains_without_vllm_and_writes_weights_and_a_finite_loss(sft_run):
    out, proc = sft_run
    assert (out / "weights" / "step_3" / "adapter_model.safetensors").is_file()
    assert not (out / "logs" / "inference.log").exists() or not (out / "logs" / "inference.log").read_text().strip()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert math.isfinite(row["loss"]) and row["loss"] > 0
        assert row["samples"] == 2 and row["sft_rows"] == 5 and row["bad_rows"] == 1
    assert "vLLM" not in proc.stderr
    assert "step 3/3  loss " in proc.stderr
    log = (out / "logs" / "orchestrator.log").read_text()
    assert "data: 5 rows from" in log and "(1 row skipped: 1 no assistant turn)" in log
    # the few-shot turns (weight 0) are context: each sample trains one reply (one run of mask 1)
    for sample in batch(out, 1):
        starts = sum(1 for a, b in zip([0, *sample["loss_mask"]], sample["loss_mask"], strict=False) if b and not a)
        assert starts == 1


def test_a_resumed_run_trains_on_the_straight_runs_batches(sft_run, prime_cache):
    out, _ = sft_run
    straight = batch(out, 3)
    first_epoch = batch(out, 1) + batch(out, 2) + straight[:1]
    assert len({json.dumps(s["input_ids"]) for s in first_epoch}) == 5  # step 3 crosses into the second epoch
    proc = run_prime(["train", str(out / "config.json"), "--resume-step", "2"], REPO,
                     {"PRIME_CACHE_DIR": str(prime_cache)}, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert batch(out, 3) == straight
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
