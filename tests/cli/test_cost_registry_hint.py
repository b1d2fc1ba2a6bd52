"""The "Cost: unknown" hint names the registry in use (issue 54, item 7): configs/endpoints.py (the verifiers
form, read when there is no endpoints.toml) when that is where the model's entry is, not endpoints.toml."""

from __future__ import annotations

from tests.cli.conftest import one_error_line
from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer


def test_unknown_cost_and_max_cost_name_the_python_registry_in_use(tmp_path):
    with ScriptedOpenAIServer() as server:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "endpoints.py").write_text(
            f'ENDPOINTS = {{"mystery": {{"model": "scripted-model", "url": "{server.url}", "key": "local"}}}}\n')
        result = run_prime(["eval", "run", "reverse-text", "-m", "mystery", "-n", "1", "-r", "1"], tmp_path)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
        line = next(x for x in result.stdout.splitlines() if x.startswith("Cost: "))
        assert line.startswith("Cost: unknown (no prices for mystery") and "input_price" in line, line
        assert "configs/endpoints.py" in line and "endpoints.toml" not in line, line
        refused = run_prime(["eval", "run", "reverse-text", "-m", "mystery", "--max-cost", "1"], tmp_path)
    line = one_error_line(refused, "--max-cost", "mystery", "input_price", "configs/endpoints.py")
    assert "endpoints.toml" not in line, line


def test_a_registry_given_with_e_is_the_one_named(tmp_path):
    with ScriptedOpenAIServer() as server:
        registry = tmp_path / "mine.toml"
        registry.write_text(f'[[endpoint]]\nendpoint_id = "mystery"\nmodel = "scripted-model"\nurl = "{server.url}"\n')
        result = run_prime(["eval", "run", "reverse-text", "-m", "mystery", "-e", str(registry), "-n", "1", "-r", "1"],
                           tmp_path)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    line = next(x for x in result.stdout.splitlines() if x.startswith("Cost: "))
    assert "mine.toml" in line and "configs/endpoints.toml" not in line, line


def test_gepa_max_cost_refusal_names_the_registry_given_with_e(tmp_path):
    with ScriptedOpenAIServer() as server:
        registry = tmp_path / "mine.toml"
        registry.write_text(f'[[endpoint]]\nendpoint_id = "mystery"\nmodel = "scripted-model"\nurl = "{server.url}"\n')
        refused = run_prime(["gepa", "run", "reverse-text", "-m", "mystery", "-e", str(registry), "--max-cost", "1"],
                            tmp_path)
    line = one_error_line(refused, "--max-cost", "mystery", "input_price", "mine.toml")
    assert "configs/endpoints.toml" not in line, line
