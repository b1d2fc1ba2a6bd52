"""`prime train` of an SFT config for real, through the installed `prime`: the embedded SmolLM2 fine-tuned, with no
vLLM, on two sources mixed 2:1: a tiny JSONL of reverse-text chats (the lead's data file, its few-shot turns of
weight 0) and a saved eval run (written by the eval engine) kept at min_reward 1. Three steps with a checkpoint
each, then `--resume-step 2`: the resumed run trains on exactly the straight run's step-3 batch (the data order's
epochs and cursors are in the checkpoint; step 3 crosses into the JSONL's second epoch)."""

from __future__ import annotations

import asyncio
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


def replier():
    """The exact reversal of every second sentence (reward 1), half of it for the others."""
    count = [0]

    def reply(messages, tools, sampling_args):
        count[0] += 1
        text = messages[-1]["content"]
        return text[::-1] if count[0] % 2 else text[::-1][: len(text) // 2]

    return reply


def eval_run(folder: Path) -> Path:
    from prime_cli.envs import load_environment
    from prime_cli.evals.in_training import evaluate_policy
    from tests.support.scripted_client import ScriptedClient

    run_dir = folder / "evals" / "run1"
    args = {"plain_text": True, "num_eval_examples": 6}
    asyncio.run(evaluate_policy(load_environment("reverse-text", **args), "reverse-text", args,
                                ScriptedClient(replier()), "m", "http://unused/v1", run_dir, num_examples=6,
                                rollouts_per_example=1, max_concurrent=1))
    return run_dir


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
        batch_size = 3

        [[data.source]]
        dataset = "{data}"
        ratio = 2

        [[data.source]]
        dataset = "{eval_run(folder)}"
        min_reward = 1.0

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
        assert row["samples"] == 3 and row["sft_rows"] == 5 + 3 and row["bad_rows"] == 1
    assert "vLLM" not in proc.stderr
    assert "step 3/3  loss " in proc.stderr
    # the sources' lines reach the terminal, before the first step
    assert proc.stderr.index("(1 row skipped: 1 no assistant turn)") < proc.stderr.index("step 1/3")
    log = (out / "logs" / "orchestrator.log").read_text()
    assert "data: 5 rows from" in log and "(1 row skipped: 1 no assistant turn)" in log
    assert "data: 3 rows from" in log and "1 eval run of reverse-text, 6 rollouts, 3 below min_reward 1)" in log
    # the few-shot turns (weight 0 in the JSONL, in the eval prompt) are context: each sample trains one reply
    for sample in batch(out, 1):
        starts = sum(1 for a, b in zip([0, *sample["loss_mask"]], sample["loss_mask"], strict=False) if b and not a)
        assert starts == 1


def test_a_resumed_run_trains_on_the_straight_runs_batches(sft_run, prime_cache):
    out, _ = sft_run
    straight = batch(out, 3)
    jsonl = [s for step in (1, 2, 3) for s in batch(out, step) if s["env"].endswith("rows.jsonl")]
    assert len(jsonl) == 6 and len({json.dumps(s["input_ids"]) for s in jsonl[:5]}) == 5  # step 3: a second epoch
    proc = run_prime(["train", str(out / "config.json"), "--resume-step", "2"], REPO,
                     {"PRIME_CACHE_DIR": str(prime_cache)}, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert batch(out, 3) == straight
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
