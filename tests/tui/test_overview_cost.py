"""Pilot tests: the overview's usage card shows the run's dollar cost from metadata.json `cost`, says
"unknown" (never $0) when a price was unknown, and "not recorded" for runs saved before costs were."""

import json

import pytest

from prime_cli.results.cost import RoleTally, cost_record
from prime_cli.tui.app import make_app
from tests.tui.conftest import SIZE, screen_text, settle
from tests.tui.fixtures import rows_for, write_eval_run

PRICE = {"model": "m", "input_per_million": 0.4, "output_per_million": 1.6, "source": "litellm"}


def with_cost(run_dir, prices):
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    student = RoleTally()
    for _ in rows:
        student.add("m", {"prompt_tokens": 1_000_000, "completion_tokens": 500_000})
    meta = json.loads((run_dir / "metadata.json").read_text())
    meta["cost"] = cost_record({"student": student}, {"student": prices})
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    return meta["cost"]


def usage_card(app) -> str:
    text = screen_text(app)
    return text[text.index("cost, tokens and timing"):]


@pytest.mark.parametrize("prices, shown", [({"m": PRICE}, "$7.20 (m: $0.4 in / $1.6 out"), ({}, "unknown")])
async def test_overview_shows_the_cost(tmp_path, prices, shown):
    run_dir = write_eval_run(tmp_path, rows_for(3, 2))
    cost = with_cost(run_dir, prices)
    assert (cost["total_usd"] is None) == (not prices)  # 6 rollouts x (1M x $0.4 + 0.5M x $1.6) / 1M = $7.20
    app = make_app(run_dir)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        card = usage_card(app)
        assert "cost" in card and shown in card, card
        assert "$0.00" not in card


async def test_a_run_without_a_cost_record_says_so(tmp_path):
    app = make_app(write_eval_run(tmp_path, rows_for(3, 2)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "not recorded" in usage_card(app)
