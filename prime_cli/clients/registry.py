"""The endpoint registry: which URL, key variable and headers serve a model name.

`configs/endpoints.toml` holds `[[endpoint]]` blocks::

    [[endpoint]]
    endpoint_id = "qwen3-8b"
    model = "Qwen/Qwen3-8B"
    url = "http://gpu-1:8000/v1"
    key = "VLLM_API_KEY"          # the NAME of an environment variable, never the key itself
    headers = { "X-Team" = "evals" }
    input_price = 0.15            # optional: dollars per million prompt tokens (overrides LiteLLM's table)
    output_price = 0.60           # optional: dollars per million completion tokens
    context_length = 32768        # optional: prompt + completion tokens the model takes (else asked of the server)

Several blocks with one `endpoint_id` are replicas of one model; the eval spreads example groups
over them round-robin. A name that is not in the registry is a literal model id for the `-b URL`
server, a LiteLLM name (`litellm/<provider>/<model>`, `<provider>/<model>` for a provider LiteLLM
knows, or a bare name LiteLLM's model list gives a provider: `gpt-4.1-mini` is OpenAI's), or else an
error: no name is ever sent to a server the user did not name.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import ClientConfigError

DEFAULT_REGISTRY_PATH = Path("configs/endpoints.toml")
PYTHON_REGISTRY_PATH = Path("configs/endpoints.py")  # the verifiers form, read when no endpoints.toml exists
DEFAULT_KEY_VAR = "OPENAI_API_KEY"
LITELLM_PREFIX = "litellm/"
NO_KEY = "EMPTY"
"""The API key sent to servers that need none (vLLM and friends accept any value)."""

REQUIRED_KEYS = ("endpoint_id", "model", "url")
OPTIONAL_KEYS = ("key", "headers", "input_price", "output_price", "context_length")
PRICE_KEYS = ("input_price", "output_price")
TOP_LEVEL_KEYS = ("endpoint", "index")  # [[index]]: package indexes, read by prime_cli/workspace/indexes.py
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class EndpointSpec:
    """One endpoint serving one model. `key_var` names the environment variable holding the key."""

    endpoint_id: str
    model: str
    url: str
    key_var: str | None
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # values may be credentials
    kind: str = "openai"
    input_price: float | None = None  # dollars per million tokens, from the registry entry
    output_price: float | None = None
    registered: bool = field(default=False, compare=False)  # a registry entry (not a -b or LiteLLM name)
    context_length: int | None = None  # tokens (prompt + completion), from the registry entry


def _suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _is_var_name(value: str) -> bool:
    return bool(_VAR_NAME.match(value))


def _parse_block(path: Path, index: int, block: Any) -> EndpointSpec:
    where = f"{path}: endpoint {index}"
    if not isinstance(block, dict):
        raise ClientConfigError(f"{where}: expected a table ([[endpoint]]), got {type(block).__name__}")
    allowed = REQUIRED_KEYS + OPTIONAL_KEYS
    for name in block:
        if name not in allowed:
            raise ClientConfigError(f"{where}: unknown key '{name}'{_suggest(name, allowed)}")
    values: dict[str, str] = {}
    for name in REQUIRED_KEYS:
        if name not in block:
            raise ClientConfigError(f"{where}: missing required key '{name}'")
        value = block[name]
        if not isinstance(value, str) or not value.strip():
            raise ClientConfigError(f"{where}: key '{name}' must be a non-empty string")
        values[name] = value.strip()
    if not values["url"].startswith(("http://", "https://")):
        raise ClientConfigError(f"{where}: key 'url' must start with http:// or https:// (got '{values['url']}')")
    key_var = block.get("key")
    if key_var is not None:
        # Never echo the value: it may be a pasted secret.
        if not isinstance(key_var, str) or not _is_var_name(key_var):
            raise ClientConfigError(
                f"{where}: key 'key' must be the NAME of an environment variable (e.g. OPENAI_API_KEY), "
                "not the API key itself"
            )
    headers = block.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ClientConfigError(f"{where}: key 'headers' must be a table of strings, e.g. headers = {{ \"X-Team\" = \"evals\" }}")
    kind = "openai"
    model = values["model"]
    if model.startswith(LITELLM_PREFIX):
        kind, model = "litellm", model[len(LITELLM_PREFIX):]
    prices = _prices(where, block)
    context = block.get("context_length")
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context < 1):
        raise ClientConfigError(f"{where}: key 'context_length' must be a positive number of tokens, e.g. 32768")
    return EndpointSpec(values["endpoint_id"], model, values["url"], key_var, dict(headers), kind, *prices,
                        registered=True, context_length=context)


def _prices(where: str, block: dict[str, Any]) -> tuple[float | None, float | None]:
    """`input_price` / `output_price`: dollars per million tokens, both or neither."""
    given = [name for name in PRICE_KEYS if name in block]
    if len(given) == 1:
        missing = next(name for name in PRICE_KEYS if name not in block)
        raise ClientConfigError(f"{where}: '{given[0]}' is set but '{missing}' is not; give both "
                                "(dollars per million tokens, e.g. input_price = 0.4, output_price = 1.6)")
    values: list[float | None] = []
    for name in PRICE_KEYS:
        value = block.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise ClientConfigError(f"{where}: key '{name}' must be a non-negative number of dollars per "
                                    f"million tokens (e.g. {name} = 0.4), got {value!r}")
        values.append(float(value) if value is not None else None)
    return values[0], values[1]


def _read_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ClientConfigError(f"{path}: invalid TOML: {exc}") from None


def load_registry(path: str | os.PathLike[str]) -> dict[str, list[EndpointSpec]]:
    """Read an endpoint registry: endpoint id -> its replicas, in file order."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ClientConfigError(f"endpoint registry {path} does not exist (-e/--endpoints-path names it)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientConfigError(f"cannot read endpoint registry {path}: {exc}") from None
    if path.suffix == ".py":
        from .endpoints_py import endpoint_blocks  # lazy: start-up

        data: dict[str, Any] = {"endpoint": endpoint_blocks(path, text)}
    else:
        data = _read_toml(path, text)
    for name in data:
        if name not in TOP_LEVEL_KEYS:
            raise ClientConfigError(f"{path}: unknown top-level key '{name}'{_suggest(name, TOP_LEVEL_KEYS)}; "
                                    "endpoints are [[endpoint]] blocks (and package indexes [[index]] tables)")
    blocks = data.get("endpoint", [])
    if not isinstance(blocks, list):
        raise ClientConfigError(f"{path}: 'endpoint' must be written as [[endpoint]] blocks")
    registry: dict[str, list[EndpointSpec]] = {}
    for index, block in enumerate(blocks, start=1):
        spec = _parse_block(path, index, block)
        registry.setdefault(spec.endpoint_id, []).append(spec)
    return registry


def default_registry_path() -> Path:
    """configs/endpoints.toml, or configs/endpoints.py (the verifiers form) when only that exists."""
    if not DEFAULT_REGISTRY_PATH.is_file() and PYTHON_REGISTRY_PATH.is_file():
        return PYTHON_REGISTRY_PATH
    return DEFAULT_REGISTRY_PATH


def check_base_url(url: str | None, flag: str = "-b") -> None:
    """`url` (given with `flag`) is an http(s) URL, or None."""
    if url is not None and not url.startswith(("http://", "https://")):
        raise ClientConfigError(f"{flag} must be a URL starting with http:// or https:// (got '{url}')")


def is_local_url(url: str) -> bool:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host in LOCAL_HOSTS


def resolve_model(
    name: str,
    *,
    base_url: str | None = None,
    key_var: str | None = None,
    registry_path: str | os.PathLike[str] | None = None,
    headers: dict[str, str] | None = None,
) -> list[EndpointSpec]:
    """The endpoints serving `name` (`-m`), with `-b`/`-k`/`--header` applied."""
    if key_var is not None and not _is_var_name(key_var):
        raise ClientConfigError("-k takes the NAME of an environment variable holding the key "
                                "(e.g. -k OPENAI_API_KEY), not the key itself")
    check_base_url(base_url)
    extra = dict(headers or {})
    where = Path(registry_path) if registry_path is not None else default_registry_path()
    registry = load_registry(where) if registry_path is not None or where.is_file() else None
    if registry and name in registry:
        return [
            replace(spec, url=base_url or spec.url, key_var=key_var or spec.key_var, headers={**spec.headers, **extra})
            for spec in registry[name]
        ]
    if not name.strip():
        raise ClientConfigError("the model name is empty; pass -m MODEL")
    if name.startswith(LITELLM_PREFIX):
        model = name[len(LITELLM_PREFIX):]
        if "/" not in model:
            raise ClientConfigError(f"litellm models are named litellm/<provider>/<model> (got '{name}')")
        return [EndpointSpec(name, model, base_url or "", key_var, extra, "litellm")]
    if base_url:
        if key_var is None and not is_local_url(base_url):
            key_var = DEFAULT_KEY_VAR
        return [EndpointSpec(name, name, base_url, key_var, extra, "openai")]
    if "/" in name:
        from .providers import provider_of  # lazy: already loaded

        if provider_of(name):
            return [EndpointSpec(name, name, "", key_var, extra, "litellm")]
    else:
        from .model_names import bare_model_route  # lazy: already loaded

        if bare_model_route(name):  # gpt-4.1-mini: LiteLLM's model list names its provider (OpenAI)
            return [EndpointSpec(name, name, "", key_var, extra, "litellm")]
    raise ClientConfigError(unknown_model_message(name, where, registry))


def unknown_model_message(name: str, registry_path: Path, registry: dict[str, list[EndpointSpec]] | None) -> str:
    if registry is None:
        known = f"there is no endpoint registry ({registry_path} not found; -e PATH names one)"
    elif registry:
        known = f"endpoint ids in {registry_path}: {', '.join(registry)}{_suggest(name, list(registry))}"
    else:
        known = f"{registry_path} has no endpoints"
    from .model_names import spelling_hint  # lazy: already loaded

    hint = spelling_hint(name)
    return (f"unknown model '{name}'{f' ({hint})' if hint else ''}: {known}; for any OpenAI-compatible server pass -b URL "
            f"(e.g. -m {name} -b https://api.openai.com/v1 -k OPENAI_API_KEY), for another provider "
            "a LiteLLM name such as anthropic/claude-sonnet-4 or a model LiteLLM lists (gpt-4.1-mini), "
            "or -m local for the embedded model")


def secret_header_values(headers: dict[str, str]) -> list[str]:
    """Values of headers that look like credentials (Authorization, X-API-Key, ...), to redact."""
    markers = ("auth", "key", "token", "secret", "cookie", "password")
    return [v for k, v in headers.items() if any(m in k.lower() for m in markers) and len(v) >= 4]


def api_key_for(spec: EndpointSpec, key_flag: str = "-k NAME") -> str:
    """The API key of an endpoint, read from the environment variable it names (`key_flag`: how the user
    names another variable, for the message)."""
    if spec.key_var is None:
        return NO_KEY
    value = os.environ.get(spec.key_var)
    if not value:
        raise ClientConfigError(
            f"environment variable {spec.key_var} is not set; export it or pass {key_flag} of the variable "
            "holding your key"
        )
    return value
