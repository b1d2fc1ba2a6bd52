"""LiteLLM's providers: which `-m provider/model` names go through LiteLLM, and whether their key is set.

litellm is a core dependency but heavy (seconds to import): it is imported only here, only to build a
client for a provider name, and always with its cost map read locally (it never fetches anything).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from .errors import ClientConfigError

REINSTALL_HINT = "pip install -e . (litellm is one of prime's dependencies)"
PROVIDER_TABLE = "provider_endpoints_support_backup.json"


def import_litellm() -> Any:
    """Import litellm with its model cost map read from the installed package, never downloaded."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    try:
        import litellm  # lazy: heavy
    except ImportError:
        raise ClientConfigError(f"litellm is not installed; reinstall prime: {REINSTALL_HINT}") from None
    return litellm


@functools.lru_cache(maxsize=1)
def litellm_providers() -> frozenset[str]:
    """The providers LiteLLM can reach for chat completions (anthropic, gemini, openrouter, ...).

    Read from the provider table litellm ships (milliseconds), so that deciding a name is not a
    provider name never imports litellm; litellm's own `provider_list` if that table is unreadable.
    """
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            table = json.loads((Path(folder) / PROVIDER_TABLE).read_text(encoding="utf-8"))["providers"]
            return frozenset(name for name, info in table.items() if info["endpoints"].get("chat_completions"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            break
    return frozenset(str(getattr(p, "value", p)) for p in import_litellm().provider_list)


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
