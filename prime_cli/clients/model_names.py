"""Bare model names that LiteLLM's model list knows (`gpt-4.1-mini` -> OpenAI), read without importing litellm.

vf-eval and the guides send a bare name such as `gpt-4.1-mini` to OpenAI; LiteLLM's model table (shipped in
its package, `model_prices_and_context_window_backup.json`) names each model's provider, so a bare chat
model resolves to LiteLLM with that provider, and the run says so in one line. The table is read as JSON
(~10 ms): importing litellm takes seconds and is left to the first request.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_TABLE = "model_prices_and_context_window_backup.json"
CHAT_MODES = ("chat", "responses")
# the variable LiteLLM reads for each provider's key (its own docs): bare names route to these providers only
KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
            "mistral": "MISTRAL_API_KEY", "deepseek": "DEEPSEEK_API_KEY", "xai": "XAI_API_KEY",
            "groq": "GROQ_API_KEY", "cohere_chat": "COHERE_API_KEY", "cohere": "COHERE_API_KEY",
            "openrouter": "OPENROUTER_API_KEY", "together_ai": "TOGETHERAI_API_KEY",
            "fireworks_ai": "FIREWORKS_AI_API_KEY", "perplexity": "PERPLEXITYAI_API_KEY"}
SHOWN_AS = {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Google Gemini", "vertex_ai": "Google Vertex AI",
            "mistral": "Mistral", "deepseek": "DeepSeek", "xai": "xAI", "groq": "Groq", "cohere_chat": "Cohere",
            "cohere": "Cohere", "openrouter": "OpenRouter", "together_ai": "Together AI",
            "fireworks_ai": "Fireworks AI", "perplexity": "Perplexity", "bedrock": "AWS Bedrock"}


@dataclass(frozen=True)
class BareModelRoute:
    """Where LiteLLM sends a bare model name: its provider and the variable holding that provider's key."""

    model: str
    provider: str

    @property
    def key_var(self) -> str | None:
        return KEY_VARS.get(self.provider)

    def line(self, key_var: str | None = None) -> str:
        """`gpt-4.1-mini: OpenAI via LiteLLM, key OPENAI_API_KEY` (`key_var`: a -k that replaces it)."""
        key = key_var or self.key_var
        credentials = f"key {key}" if key else "credentials as LiteLLM reads them for this provider"
        return f"{self.model}: {SHOWN_AS.get(self.provider, self.provider)} via LiteLLM, {credentials}"


@functools.lru_cache(maxsize=1)
def model_table() -> dict[str, Any]:
    """LiteLLM's model table (provider, mode, prices per token) as shipped in its package; {} without it."""
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            table = json.loads((Path(folder) / MODEL_TABLE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            break
        return {name: entry for name, entry in table.items() if isinstance(entry, dict)}
    return {}


def bare_model_route(name: str) -> BareModelRoute | None:
    """The provider LiteLLM's model table gives a bare chat model name (no `/`), or None."""
    from .providers import litellm_providers  # lazy: already loaded

    entry = model_table().get(name) if name and "/" not in name else None
    if entry is None or entry.get("mode") not in CHAT_MODES:
        return None
    provider = str(entry.get("litellm_provider") or "")
    # only providers reached with an API key we can name and check before the run: the table gives bare
    # gemini-* names to Vertex AI (Google credentials), where a user holding GEMINI_API_KEY means the
    # Gemini API (gemini/gemini-2.0-flash); such names keep the unknown-model error, which names the fix
    return BareModelRoute(name, provider) if provider in KEY_VARS and provider in litellm_providers() else None


# Vendor prefixes of the guides' and OpenRouter's model ids (google/gemini-...) that are not LiteLLM providers:
# the provider LiteLLM spells them with (its key then comes from KEY_VARS).
VENDOR_PROVIDERS = {"google": "gemini", "mistralai": "mistral", "x-ai": "xai"}


def _chat_entry(name: str) -> bool:
    entry = model_table().get(name)
    return isinstance(entry, dict) and entry.get("mode") in CHAT_MODES


def spelling_hint(name: str) -> str:
    """How LiteLLM spells a model name it does not take as given, or "": `google/gemini-3-flash-preview` is
    `gemini/gemini-3-flash-preview` (the Gemini API, key GEMINI_API_KEY), or `openrouter/google/...` through
    OpenRouter; a bare `gemini-...` that the table gives to Vertex AI is the Gemini API's `gemini/...` too."""
    vendor, slash, model = name.partition("/")
    if not slash:
        vendor, model = "", name
    if not model or "/" in model:
        return ""
    spellings: list[str] = []
    preferred = VENDOR_PROVIDERS.get(vendor)
    if preferred:  # the vendor's own API, whether or not the table lists the model yet
        spellings.append(_spelled(f"{preferred}/{model}", preferred))
    elif not slash:  # a bare name the table gives a provider whose key we cannot check (Vertex AI's gemini-*)
        found = next((p for p in KEY_VARS if p != "openrouter" and _chat_entry(f"{p}/{model}")), None)
        if found:
            spellings.append(_spelled(f"{found}/{model}", found))
    if slash and _chat_entry(f"openrouter/{name}"):
        spellings.append(f"openrouter/{name} through OpenRouter (key {KEY_VARS['openrouter']})")
    if not spellings:
        return ""
    return f"LiteLLM spells it {spellings[0]}" + "".join(f"; or {s}" for s in spellings[1:])


def _spelled(litellm_name: str, provider: str) -> str:
    key = KEY_VARS.get(provider)
    return f"{litellm_name} ({SHOWN_AS.get(provider, provider)}{f', key {key}' if key else ''})"
