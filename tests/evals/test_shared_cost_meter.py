"""One cost meter with roles (results/cost_meter.py) under the eval's and GEPA's: the same rollouts give the
same spend, record and cap decisions in both, and GEPA adds its reflection role."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from prime_cli.clients.pricing import Price
from prime_cli.evals.cost_meter import CostMeter
from prime_cli.gepa.cost import GepaCostMeter
from prime_cli.results.cost_meter import RunCostMeter

STUDENT = Price("m", 10_000.0, 20_000.0, "registry")  # a cent a prompt token, two a completion token
REFLECTOR = Price("r", 1_000_000.0, 1_000_000.0, "registry")  # a dollar a token
ROW = {"token_usage": {"prompt_tokens": 5, "completion_tokens": 5}}  # $0.15
ENTRY = {"usage": {"prompt_tokens": 5, "completion_tokens": 5}}


def test_the_eval_and_gepa_meters_are_the_shared_meter_and_agree():
    config = SimpleNamespace(model="m", max_cost=1.0, endpoints_path=None)
    eval_meter, gepa_meter = CostMeter(config, STUDENT), GepaCostMeter(config, STUDENT, REFLECTOR)
    assert isinstance(eval_meter, RunCostMeter) and isinstance(gepa_meter, RunCostMeter)
    assert eval_meter.allows(0, 4) and gepa_meter._fits(4)  # nothing paid yet: one group alone
    assert not eval_meter.allows(1, 4)
    eval_meter.add(ROW)
    gepa_meter.add_rollout(ENTRY)
    assert eval_meter.spent == pytest.approx(0.15) == gepa_meter.spent
    for width in range(1, 6):
        assert eval_meter.allows(0, width) == gepa_meter._fits(width)
    assert eval_meter.record()["roles"]["student"] == gepa_meter.record()["roles"]["student"]
    assert eval_meter.resume_cap(10, 1) == f"--max-cost {gepa_meter.suggested_cap(10, 1):.2f}" == "--max-cost 2.18"


def test_the_reflection_role_is_counted_and_recorded_with_its_calls():
    meter = RunCostMeter(STUDENT, None, lambda model: {"model": model, "source": "unknown"}, REFLECTOR)
    meter.add_reflection({"prompt_tokens": 1, "completion_tokens": 1})
    meter.add_rollout({"usage": {"prompt_tokens": 1, "completion_tokens": 0},
                       "judge_usage": {"judge-x": {"prompt_tokens": 3, "completion_tokens": 0}}})
    record = meter.record()
    assert list(record["roles"]) == ["student", "judge", "reflection"]
    assert record["roles"]["reflection"]["calls"] == 1 and meter.reflection_spend == pytest.approx(2.0)
    assert meter.unknown and record["total_usd"] is None  # a judge without prices: unknown, never $0
    assert meter.stop_head().startswith("cost cap: a judge model without prices was used")
