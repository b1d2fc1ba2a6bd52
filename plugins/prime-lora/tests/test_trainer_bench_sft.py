"""benchmarks/trainer_bench.py times an SFT step beside the RL step and reports the ratio of the two."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

REPO = Path(__file__).resolve().parents[3]


def test_the_bench_reports_sft_tokens_per_second_and_its_ratio_to_the_rl_step(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "trainer_bench.py"), "--model", "qwen3-moe-tiny",
                           "--seq-len", "64", "--steps", "1", "--no-peer", "--no-ac", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [row["variant"] for row in report["variants"]] == ["ours", "ours, sft"]
    assert report["variants"][1]["tokens_per_s"] > 0 and report["sft_pairs"] == 1
    assert report["sft_speedup_over_rl"] > 0
    assert "SFT step vs RL step on one policy, alternating: RL time / SFT time = " in proc.stdout


def test_synthetic_old_logprobs_keep_a_random_models_ratios_in_the_band():
    import math

    import torch

    from benchmarks.trainer_bench import synthetic_sample

    sample = synthetic_sample(16, 8192, torch.Generator().manual_seed(0))
    assert sample["inference_logprobs"][1] == pytest.approx(-math.log(8192))
