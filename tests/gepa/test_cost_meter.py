"""GEPA's --max-cost meter: reflection calls in flight count against the cap (the first call's cost is unknown,
so it goes alone), a resumed run knows its average reflection call, and errored rollouts that sent nothing do
not make the next rollouts look free."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from prime_cli.clients.pricing import Price
from prime_cli.gepa.cost import CostCapReached, GepaCostMeter, metered

PRICE = Price("m", 10_000.0, 20_000.0, "registry")  # a cent a prompt token, two a completion token


def meter(max_cost: float, saved=None) -> GepaCostMeter:
    return GepaCostMeter(SimpleNamespace(max_cost=max_cost, endpoints_path=None), PRICE, PRICE, saved)


def test_a_second_reflection_waits_for_the_first_ones_cost():
    cost = meter(100.0)
    cost.reflections_in_flight = 1  # the first call, sent: its cost is not known yet
    with pytest.raises(CostCapReached):
        cost.check_reflection()


def test_reflections_in_flight_count_against_the_cap():
    cost = meter(1.5)
    cost.add_reflection({"prompt_tokens": 20, "completion_tokens": 10})  # $0.40 a call
    cost.check_reflection()  # 0.40 spent + 0.60 expected (the average with its margin) fits under 1.50
    cost.reflections_in_flight = 1
    with pytest.raises(CostCapReached):  # 0.40 spent + 0.60 in flight + 0.60 more would pass 1.50
        cost.check_reflection()


def test_a_resumed_run_knows_its_average_reflection_call():
    first = meter(5.0)
    for _ in range(4):
        first.add_reflection({"prompt_tokens": 20, "completion_tokens": 10})
    resumed = meter(5.0, saved=first.record())
    assert resumed.reflection_calls == 4 and resumed.reflection_average == pytest.approx(0.40)
    old = meter(5.0, saved={"roles": {"reflection": {"prompt_tokens": 80, "completion_tokens": 40}}})
    assert old.reflection_calls == 1  # saved before calls were: taken as one call, never as free


def test_errored_rollouts_that_sent_nothing_leave_the_average_alone():
    cost = meter(1.0)
    for _ in range(5):
        cost.add_rollout({"usage": {"prompt_tokens": 0, "completion_tokens": 0}})
    assert not cost._fits(4) or cost.in_flight == 0  # no paid rollout yet: one group at a time
    cost.in_flight = 1
    assert not cost._fits(4)
    cost.in_flight = 0
    cost.add_rollout({"usage": {"prompt_tokens": 5, "completion_tokens": 5}})  # $0.15
    assert cost.rollouts_counted == 1 and not cost._fits(5)  # 5 x 0.15 x 1.5 > 1.00 - 0.15


def test_metered_counts_the_call_in_flight_and_closes_a_refused_one():
    cost = meter(100.0)

    async def call():
        assert cost.reflections_in_flight == 1
        return SimpleNamespace(usage={"prompt_tokens": 1, "completion_tokens": 1})

    asyncio.run(metered(cost, call()))
    assert cost.reflections_in_flight == 0 and cost.reflection_calls == 1
    cost.cap_reached = True
    refused = call()
    with pytest.raises(CostCapReached):
        asyncio.run(metered(cost, refused))
    assert refused.cr_frame is None  # closed, never sent
