"""Model prices: a registry entry's own prices win, then LiteLLM's table (with and without the provider
prefix), the embedded model and a -b server on this machine are free, anything else is unknown; reading
the table never imports litellm."""

from __future__ import annotations

import subprocess
import sys

import pytest

from prime_cli.clients.pricing import judge_models, price_of_name, price_of_specs, table_price
from prime_cli.clients.registry import EndpointSpec, load_registry
from prime_cli.results.cost import RoleTally, cost_record, cost_text, usage_cost, usd


def spec(model: str, kind: str = "openai", **kw) -> EndpointSpec:
    return EndpointSpec(model, model, "https://api.example.com/v1", None, {}, kind, **kw)


def test_table_prices_with_and_without_the_provider_prefix():
    assert table_price("gpt-4.1-mini") == (0.4, 1.6)
    assert table_price("anthropic/claude-sonnet-4-20250514") == table_price("claude-sonnet-4-20250514") == (3.0, 15.0)
    assert table_price("Qwen/Qwen3-8B") is None and table_price("no-such-model") is None


def test_where_a_price_comes_from():
    priced = spec("m", input_price=1.0, output_price=2.0, registered=True)
    assert price_of_specs("m", [priced]).record() == {"model": "m", "input_per_million": 1.0, "output_per_million": 2.0,
                                                      "source": "registry", "note": "endpoint registry"}
    assert price_of_specs("gpt-4.1-mini", [spec("gpt-4.1-mini", "litellm")]).source == "litellm"
    assert price_of_specs("x", [spec("gpt-4.1-mini", registered=True)]).source == "litellm"
    assert price_of_specs("x", [spec("Qwen/Qwen3-8B", registered=True)]).source == "unknown"
    assert price_of_specs("local", []).source == "free"
    local_b = price_of_specs("m", [spec("m")], base_url="http://127.0.0.1:8000/v1")
    assert (local_b.source, local_b.input_per_million) == ("free", 0.0)
    assert price_of_specs("gpt-4.1-mini", [spec("gpt-4.1-mini")], base_url="https://api.openai.com/v1").source == "litellm"


def test_a_judge_is_priced_by_its_registry_entry_id_or_model_then_the_table(tmp_path):
    registry = tmp_path / "endpoints.toml"
    registry.write_text('[[endpoint]]\nendpoint_id = "judge"\nmodel = "judge-model"\nurl = "http://h/v1"\n'
                        'input_price = 1\noutput_price = 5\n')
    assert load_registry(registry)["judge"][0].output_price == 5.0
    assert price_of_name("judge", registry).source == price_of_name("judge-model", registry).source == "registry"
    assert price_of_name("gpt-4.1-nano", registry).source == "litellm"
    assert price_of_name("mystery", registry).source == "unknown"


def test_judge_models_found_inside_rubric_groups():
    import prime_cli.envs as vf

    group = vf.RubricGroup([vf.Rubric(), vf.JudgeRubric(judge_model="a"), vf.JudgeRubric(judge_model="b")])
    assert judge_models(group) == ["a", "b"]


def test_unknown_is_never_zero():
    assert usage_cost(10, 5, None) is None and usage_cost(0, 0, None) == 0.0
    tally = RoleTally()
    tally.add("m", {"prompt_tokens": 10, "completion_tokens": 5})
    record = cost_record({"student": tally}, {"student": {"m": {"model": "m", "source": "unknown"}}})
    assert record["total_usd"] is None and cost_text(record).startswith("unknown (no prices for m")
    assert usd(None) == "unknown" and usd(0.0031) == "$0.0031" and usd(1234.5) == "$1,234.50"


@pytest.mark.parametrize("code", [
    "from prime_cli.clients.pricing import table_price; assert table_price('gpt-4.1-mini')",
    "from prime_cli.clients.pricing import price_of_specs; price_of_specs('local', [])",
])
def test_prices_never_import_litellm(code):
    check = f"{code}; import sys; assert 'litellm' not in sys.modules, 'litellm imported'"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_small_amounts_are_written_out_not_in_scientific_notation():
    from prime_cli.results.cost import usd

    assert [usd(v) for v in (3.7e-05, 1e-05, 0.00041, 0.0031, 0.42, 0.0, None, 1e-9)] == [
        "$0.000037", "$0.00001", "$0.00041", "$0.0031", "$0.42", "$0.00", "unknown", "<$0.000001"]
