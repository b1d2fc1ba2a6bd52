"""One run-target block (clients/run_target.py) in the eval's and GEPA's configs: the same TOML keys for the
environment, the model and where it is served, and one spelling of "served locally" in both."""

from __future__ import annotations

import pytest

from prime_cli.clients.run_target import RunTarget
from prime_cli.evals.config import EvalConfig, served_locally
from prime_cli.evals.config import build_config as eval_config
from prime_cli.gepa.config import GepaConfig
from prime_cli.gepa.config import build_config as gepa_config
from prime_cli.runs.config_errors import ConfigValueError

TARGET = {"model": "gpt-x", "base_url": "http://127.0.0.1:9/v1", "api_key_var": "X_KEY", "endpoints_path": "e.toml"}


def test_both_configs_take_the_block_with_the_same_keys():
    assert issubclass(EvalConfig, RunTarget) and issubclass(GepaConfig, RunTarget)
    for config in (eval_config("t", env_id="e", **TARGET), gepa_config("t", env_id="e", **TARGET)):
        assert {key: getattr(config, key) for key in TARGET} == TARGET
        assert not config.served_local and config.builtin_name is None and not config.wants_builtin()
    for build in (eval_config, gepa_config):
        with pytest.raises(ConfigValueError, match="base_ur"):
            build("t", env_id="e", base_ur="http://x")  # still extra="forbid"


def test_served_locally_is_spelt_one_way_in_both():
    local_eval = served_locally(eval_config("t", env_id="e", model="local"), "SmolLM2", "http://127.0.0.1:8000/v1")
    local_gepa = gepa_config("t", env_id="e", model="local", reflection_model="local").on_local_servers(
        {"local": ("SmolLM2", "http://127.0.0.1:8000/v1")})
    for config in (local_eval, local_gepa):
        assert config.served_local and config.builtin_name == "local" and config.model == "SmolLM2"
    assert local_gepa.reflection_served_local
    assert local_gepa.as_given()["model"] == "local" and local_gepa.as_given()["base_url"] is None
