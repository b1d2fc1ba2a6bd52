"""Sampling that is not the plain softmax at the temperature is refused before anything starts.

The trainer scores each sampled token with log_softmax(logits / temperature); vLLM's processed
log-probs after top_p / top_k / min_p / repetition_penalty are of another distribution, so the
importance ratio of every token would be wrong from step 0.
"""

from __future__ import annotations

import pytest

from tests.train.support import MINIMAL, assert_one_error_line, run_train, write


@pytest.mark.parametrize(("key", "value"), [("top_p", "0.9"), ("top_k", "20"), ("min_p", "0.05"),
                                            ("repetition_penalty", "1.05")])
def test_a_sampling_transformation_is_one_error_line(tmp_path, key, value):
    path = write(tmp_path, MINIMAL + f"\n[orchestrator.sampling]\n{key} = {value}\n")
    line = assert_one_error_line(run_train([str(path), "--dry-run"], cwd=tmp_path), f"{key} = {value}",
                                 "plain softmax")
    assert "remove it" in line


def test_neutral_values_are_accepted_and_shown(tmp_path):
    path = write(tmp_path, MINIMAL + "\n[orchestrator.sampling]\ntop_p = 1.0\ntop_k = -1\nmin_p = 0.0\n"
                                     "repetition_penalty = 1.0\ntemperature = 0.8\n")
    result = run_train([str(path), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "top_k = -1" in result.stdout and "repetition_penalty = 1.0" in result.stdout
