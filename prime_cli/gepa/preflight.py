"""What a GEPA run checks before it costs anything: before the local model is started and before any
request is sent. The budget, the environment and its arguments, the rows, and the student and
reflection endpoints (-m/-M, -b, --reflection-base-url, -k, -e); the run folder is checked when the
config is resolved. Nothing is written.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import prime_cli.envs as vf

from .config import GepaConfig
from .cost import check_cost_cap
from .model_endpoints import model_specs, reflection_url  # noqa: F401 - api.py imports model_specs from here
from .rows import Splits, make_splits, seed_prompt


@dataclass
class SearchInputs:
    env: vf.Environment
    seed_text: str
    splits: Splits


def load_inputs(config: GepaConfig) -> SearchInputs:
    config.check_budget()
    env = vf.load_environment(config.env_id, **config.env_args)
    seed_text = seed_prompt(env)
    splits = make_splits(env, seed_text, config.num_train, config.num_val, config.num_test, config.seed)
    return SearchInputs(env, seed_text, splits)


def open_model_pool(config: GepaConfig, specs: list[Any], served_local: bool = False) -> Any:
    from prime_cli.clients.endpoints import open_pool  # lazy: already loaded

    timeout = config.timeout_for(served_local)
    return open_pool(specs, max_concurrent=config.max_concurrent, max_retries=config.max_retries,
                     timeout=timeout, on_retry=lambda *retry: say_retry(timeout, *retry))


def say_retry(timeout: float, describe: str, reason: str, attempt: int, max_retries: int) -> None:
    """A request that timed out may still be generating on the server: the retry starts it again from
    scratch, so the user is told (on stderr, above the live panel) and shown the flag to change."""
    if reason != "timeout":
        return
    print(f"warning: {describe} sent no reply within {timeout:g}s (--timeout); the server may still be "
          f"generating it, and this retry ({attempt}/{max_retries}) starts the request again from scratch",
          file=sys.stderr, flush=True)


def check_endpoints(config: GepaConfig) -> None:
    from prime_cli.clients.endpoints import check_endpoints as check  # lazy: already loaded
    from prime_cli.clients.registry import check_base_url  # lazy: already loaded

    check_base_url(config.reflection_base_url, "--reflection-base-url")
    lines = check(config.model, config.base_url, config.api_key_var, config.endpoints_path)
    lines += check(config.reflector, reflection_url(config), config.api_key_var, config.endpoints_path,
                   role="reflection model -M")
    for line in dict.fromkeys(lines):
        print(line, file=sys.stderr, flush=True)


def preflight(config: GepaConfig) -> SearchInputs:
    """The environment and rows of the run; raises EnvConfigError (one line for the CLI) on bad input."""
    inputs = load_inputs(config)
    check_endpoints(config)
    check_cost_cap(config, inputs.env)
    return inputs
