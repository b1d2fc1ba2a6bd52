"""LiteLLM's providers: which `-m provider/model` names go through LiteLLM, and whether their key is set.

litellm is a core dependency but heavy (seconds to import): it is imported only here, only when a
name could be a provider name, and always with its cost map read locally (it never fetches anything).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from .errors import ClientConfigError

REINSTALL_HINT = "pip install -e . (litellm is one of prime's dependencies)"


def import_litellm() -> Any:
    """Import litellm with its model cost map read from the installed package, never downloaded."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    try:
        import litellm
    except ImportError:
        raise ClientConfigError(f"litellm is not installed; reinstall prime: {REINSTALL_HINT}") from None
    return litellm


@functools.lru_cache(maxsize=1)
def litellm_providers() -> frozenset[str]:
    """The provider prefixes LiteLLM knows (anthropic, gemini, openrouter, ...), as LiteLLM lists them."""
    providers = import_litellm().provider_list
    return frozenset(str(getattr(p, "value", p)) for p in providers)


def provider_of(name: str) -> str | None:
    """The LiteLLM provider of a `provider/model` name, or None when the prefix is not a provider."""
    prefix, slash, model = name.partition("/")
    if not slash or not prefix or not model:
        return None
    return prefix if prefix in litellm_providers() else None


def missing_provider_keys(model: str) -> list[str]:
    """API-key variables the provider of `model` needs and none of which is set (e.g. ANTHROPIC_API_KEY).

    Only `*_API_KEY` variables count: providers that can also authenticate another way (AWS or Google
    credentials files, a local Ollama) are left to LiteLLM.
    """
    litellm = import_litellm()
    empty = {name: value for name, value in os.environ.items() if not value}
    for name in empty:  # LiteLLM counts a variable set to "" as a key; for us it is unset
        del os.environ[name]
    try:
        report = litellm.validate_environment(model=model)
    except Exception:  # noqa: BLE001 - an unknown model or provider: LiteLLM reports it on the first call
        return []
    finally:
        os.environ.update(empty)
    if report.get("keys_in_environment", True):
        return []
    missing = [str(key) for key in report.get("missing_keys") or []]
    return missing if missing and all(key.endswith("_API_KEY") for key in missing) else []
