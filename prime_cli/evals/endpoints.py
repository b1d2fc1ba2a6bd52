"""From an EvalConfig to a pool of model clients (and the secrets to keep out of logs)."""

from __future__ import annotations

import os
from typing import Any

from .config import EvalConfig


def endpoint_specs(config: EvalConfig) -> list[Any]:
    from prime_cli.clients import resolve_model

    if config.model == "local" and not config.base_url:
        from prime_cli.clients.errors import ClientConfigError

        raise ClientConfigError(
            "the embedded local model is not available in this version; pass -m MODEL with -b URL "
            "(any OpenAI-compatible server) or an endpoint id from configs/endpoints.toml"
        )
    return resolve_model(config.model, base_url=config.base_url, key_var=config.api_key_var,
                         registry_path=config.endpoints_path, headers=config.headers)


def open_pool(config: EvalConfig, specs: list[Any]) -> Any:
    from prime_cli.clients import ClientPool, RetryPolicy

    return ClientPool(specs, max_concurrent=config.max_concurrent, retry=RetryPolicy(max_retries=config.max_retries),
                      timeout=config.timeout)


def secrets_of(specs: list[Any]) -> list[str]:
    """API keys and credential-like header values, redacted from eval.log."""
    from prime_cli.clients.registry import secret_header_values

    values = [os.environ.get(spec.key_var or "") for spec in specs]
    for spec in specs:
        values.extend(secret_header_values(spec.headers))
    return [v for v in values if v and len(v) >= 4 and v != "EMPTY"]


PLACEHOLDER_LOCAL_URL = "http://127.0.0.1:8000/v1"


def check_endpoints(config: EvalConfig, role: str = "") -> None:
    """Resolve -m/-b/-k/-e/--header and check that every key variable is set, sending no request. The
    `local` model is checked against a placeholder loopback URL (its server is not started yet).
    `role` (e.g. "reflection model -M") prefixes the message when there are several models."""
    from prime_cli.clients import api_key_for
    from prime_cli.clients.errors import ClientConfigError

    if config.model == "local" and not config.base_url:
        config = config.model_copy(update={"base_url": PLACEHOLDER_LOCAL_URL})
    try:
        for spec in endpoint_specs(config):
            if spec.key_var:
                api_key_for(spec)
    except ClientConfigError as exc:
        prefix = f"{role} {config.model}: " if role else ""
        raise ClientConfigError(f"{prefix}{exc}{_endpoint_id_hint(config)}") from None


def _endpoint_id_hint(config: EvalConfig) -> str:
    """A name close to an endpoint id of the registry, used without -b, is most likely a typo of it."""
    import difflib

    from prime_cli.clients.errors import ClientConfigError
    from prime_cli.clients.registry import DEFAULT_REGISTRY_PATH, load_registry

    path = config.endpoints_path or DEFAULT_REGISTRY_PATH
    if config.base_url or not os.path.isfile(path):
        return ""
    try:
        ids = list(load_registry(path))
    except ClientConfigError:
        return ""
    close = difflib.get_close_matches(config.model, ids, n=1, cutoff=0.8)
    if config.model in ids or not close:
        return ""
    return f" ({config.model!r} is not an endpoint id in {path}; did you mean {close[0]!r}?)"
