"""From the model flags of a run (-m, -b, -k, -e, --header) to a pool of clients, with plain arguments,
so that every engine (eval, GEPA) resolves a model the same way. The secrets of the endpoints come
along, to be kept out of run logs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .command_flags import is_local_model
from .errors import ClientConfigError
from .registry import (
    EndpointSpec,
    api_key_for,
    default_registry_path,
    load_registry,
    resolve_model,
    secret_header_values,
)

if TYPE_CHECKING:
    from .pool import ClientPool

PLACEHOLDER_LOCAL_URL = "http://127.0.0.1:8000/v1"
"""Where the embedded model is assumed to be while its server is not started yet (checks only)."""


def endpoint_specs(model: str, base_url: str | None = None, key_var: str | None = None,
                   endpoints_path: str | None = None, headers: Mapping[str, str] | None = None) -> list[EndpointSpec]:
    """The endpoints of `-m model` (with -b/-k/-e/--header applied). The embedded `local` model needs the
    URL of its server: the engine finds or starts it first and passes it as `base_url`."""
    if is_local_model(model) and not base_url:
        raise ClientConfigError(
            f"the built-in model {model!r} is not served here; pass -m MODEL with -b URL "
            "(any OpenAI-compatible server) or an endpoint id from configs/endpoints.toml"
        )
    return resolve_model(model, base_url=base_url, key_var=key_var, registry_path=endpoints_path,
                         headers=dict(headers or {}))


def open_pool(specs: list[EndpointSpec], *, max_concurrent: int, max_retries: int, timeout: float,
              on_retry: Callable[[str, str, int, int], None] | None = None) -> ClientPool:
    """One client per endpoint replica, `max_concurrent` requests in flight, the shared retry policy
    (`on_retry` is told of each retry)."""
    from .pool import ClientPool  # lazy: already loaded
    from .retry import RetryPolicy  # lazy: already loaded

    return ClientPool(specs, max_concurrent=max_concurrent,
                      retry=RetryPolicy(max_retries=max_retries, on_retry=on_retry), timeout=timeout)


def secrets_of(specs: list[EndpointSpec]) -> list[str]:
    """API keys and credential-like header values, redacted from run logs."""
    values = [os.environ.get(spec.key_var or "") for spec in specs]
    for spec in specs:
        values.extend(secret_header_values(spec.headers))
    return [v for v in values if v and len(v) >= 4 and v != "EMPTY"]


def check_endpoints(model: str, base_url: str | None = None, key_var: str | None = None,
                    endpoints_path: str | None = None, headers: Mapping[str, str] | None = None,
                    role: str = "", key_flag: str = "-k NAME") -> list[str]:
    """Resolve the model flags and check that every key variable is set, sending no request. The `local`
    model is checked against a placeholder loopback URL (its server is not started yet). `role`
    (e.g. "reflection model -M") prefixes the message when a run has several models; `key_flag` is how
    the user names another key variable there (-k NAME, or an environment argument). Returns the lines
    the run shows about where a name goes (a bare name LiteLLM routes: `gpt-4.1-mini: OpenAI via
    LiteLLM, key OPENAI_API_KEY`)."""
    if is_local_model(model) and not base_url:
        base_url = PLACEHOLDER_LOCAL_URL
    lines: list[str] = []
    try:
        for spec in endpoint_specs(model, base_url, key_var, endpoints_path, headers):
            if spec.key_var:
                api_key_for(spec, key_flag)
            if spec.kind == "litellm":
                from .litellm_client import check_provider_key, route_line  # lazy: already loaded

                check_provider_key(spec, key_flag)
                if (line := route_line(spec)) and line not in lines:
                    lines.append(line)
    except ClientConfigError as exc:
        prefix = f"{role} {model}: " if role else ""
        raise ClientConfigError(f"{prefix}{exc}{_endpoint_id_hint(model, base_url, endpoints_path)}") from None
    return lines


def _endpoint_id_hint(model: str, base_url: str | None, endpoints_path: str | None) -> str:
    """A name close to an endpoint id of the registry, used without -b, is most likely a typo of it."""
    import difflib  # lazy: already loaded

    path = endpoints_path or default_registry_path()
    if base_url or not os.path.isfile(path):
        return ""
    try:
        ids = list(load_registry(path))
    except ClientConfigError:
        return ""
    close = difflib.get_close_matches(model, ids, n=1, cutoff=0.8)
    if model in ids or not close:
        return ""
    return f" ({model!r} is not an endpoint id in {path}; did you mean {close[0]!r}?)"
