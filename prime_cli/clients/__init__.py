"""Model access: the endpoint registry, the OpenAI-compatible client and the optional LiteLLM client.

Importing this package is light: `openai` and `litellm` are imported only when a client is built.
"""

from .endpoints import check_endpoints, endpoint_specs, open_pool, secrets_of
from .errors import ClientConfigError, FatalEndpointError, MalformedResponseError
from .litellm_client import LiteLLMChatClient
from .openai_client import OpenAIChatClient
from .pool import ClientPool, make_client
from .registry import (
    DEFAULT_REGISTRY_PATH,
    EndpointSpec,
    api_key_for,
    load_registry,
    resolve_model,
    secret_header_values,
)
from .retry import RetryCounts, RetryPolicy, call_with_retries, classify, redact

__all__ = [
    "DEFAULT_REGISTRY_PATH",
    "ClientConfigError",
    "ClientPool",
    "EndpointSpec",
    "FatalEndpointError",
    "LiteLLMChatClient",
    "MalformedResponseError",
    "OpenAIChatClient",
    "RetryCounts",
    "RetryPolicy",
    "api_key_for",
    "call_with_retries",
    "check_endpoints",
    "classify",
    "endpoint_specs",
    "load_registry",
    "make_client",
    "open_pool",
    "redact",
    "resolve_model",
    "secret_header_values",
    "secrets_of",
]
