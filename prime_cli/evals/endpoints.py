"""From an EvalConfig to a pool of model clients (and the secrets to keep out of logs), through
prime_cli.clients.endpoints, which the GEPA engine uses too."""

from __future__ import annotations

from typing import Any

from prime_cli.clients import endpoints

from .config import EvalConfig


def endpoint_specs(config: EvalConfig) -> list[Any]:
    return endpoints.endpoint_specs(config.model, config.base_url, config.api_key_var, config.endpoints_path,
                                    config.headers)


def open_pool(config: EvalConfig, specs: list[Any]) -> Any:
    return endpoints.open_pool(specs, max_concurrent=config.max_concurrent, max_retries=config.max_retries,
                               timeout=config.timeout)


secrets_of = endpoints.secrets_of


def check_endpoints(config: EvalConfig, role: str = "") -> list[str]:
    """Resolve -m/-b/-k/-e/--header and check that every key variable is set, sending no request; returns
    the lines to show about where the model goes."""
    return endpoints.check_endpoints(config.model, config.base_url, config.api_key_var, config.endpoints_path,
                              config.headers, role=role)
