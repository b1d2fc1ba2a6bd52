"""Sampling settings: top_p / top_k / min_p / repetition_penalty are accepted (the trainer applies the
sampler's transformation to its logits, prime_lora/trainer/sampling.py) and the plan says which
distribution both sides use; vLLM's presence and frequency penalties, which the trainer does not apply,
are refused with one line before anything starts.
"""

from __future__ import annotations

import pytest

from tests.train.support import MINIMAL, assert_one_error_line, run_train, write

HOSTED = """
model = "local"
batch_size = 16
rollouts_per_example = 4

[sampling]
temperature = 0.8
top_p = 0.95
top_k = 20
min_p = 0.02
repetition_penalty = 1.1

[[env]]
id = "reverse-text"
"""


def _plan_sampling_line(stdout: str) -> str:
    (line,) = [line.strip() for line in stdout.splitlines() if line.strip().startswith("sampling: ")]
    return line


def test_the_hosted_sampling_table_loads_as_written_and_the_plan_names_the_distribution(tmp_path):
    result = run_train([str(write(tmp_path, HOSTED)), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for key, value in (("top_p", "0.95"), ("top_k", "20"), ("min_p", "0.02"), ("repetition_penalty", "1.1")):
        assert f"{key} = {value}" in result.stdout
    line = _plan_sampling_line(result.stdout)
    assert line.startswith("sampling: temperature 0.8, repetition_penalty 1.1, min_p 0.02, top_k 20, top_p 0.95 ")
    assert "the trainer applies the same penalty and truncation" in line and "full softmax" not in line


def test_neutral_values_are_the_full_softmax(tmp_path):
    path = write(tmp_path, MINIMAL + "\n[orchestrator.sampling]\ntop_p = 1.0\ntop_k = -1\nmin_p = 0.0\n"
                                     "repetition_penalty = 1.0\ntemperature = 0.8\npresence_penalty = 0.0\n")
    result = run_train([str(path), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "top_k = -1" in result.stdout and "repetition_penalty = 1.0" in result.stdout
    assert "presence_penalty" not in result.stdout
    assert _plan_sampling_line(result.stdout).startswith("sampling: temperature 0.8 over the full softmax")


@pytest.mark.parametrize("key", ["presence_penalty", "frequency_penalty"])
def test_a_penalty_the_trainer_does_not_apply_is_one_error_line(tmp_path, key):
    path = write(tmp_path, HOSTED.replace("[sampling]\n", f"[sampling]\n{key} = 0.5\n"))
    line = assert_one_error_line(run_train([str(path), "--dry-run"], cwd=tmp_path), f"{key} = 0.5",
                                 "repetition_penalty")
    assert "remove it" in line
