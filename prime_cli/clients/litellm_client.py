"""A ChatClient over LiteLLM, for providers without an OpenAI-compatible API.

`-m anthropic/claude-sonnet-4` (any provider prefix LiteLLM knows) or `litellm/<provider>/<model>`.
litellm is imported when a client is built (see `providers`). Its own retries are off; the shared
retry policy applies (LiteLLM's exceptions subclass openai's).
"""

from __future__ import annotations

from typing import Any

from prime_cli.envs.types import ChatResponse, Message, SamplingArgs

from .base import EndpointClient
from .errors import ClientConfigError
from .model_names import bare_model_route
from .openai_client import NEVER_SENT, chat_response_from
from .providers import import_litellm, missing_provider_keys
from .registry import LITELLM_PREFIX, EndpointSpec, api_key_for, secret_header_values


def check_provider_key(spec: EndpointSpec, key_flag: str = "-k NAME") -> None:
    """Fail before any request when the provider's key variable is unset (and no -k or URL replaces it)."""
    if spec.key_var or spec.url:
        return
    missing = missing_provider_keys(spec.model)
    if missing:
        provider = provider_name(spec.model)
        raise ClientConfigError(
            f"{spec.endpoint_id} goes through LiteLLM to provider '{provider}', which reads its key from "
            f"{' or '.join(missing)}: not set; export it, or pass {key_flag} of the variable holding the key")


def provider_name(model: str) -> str:
    """The LiteLLM provider of `anthropic/claude-...` or of a bare listed name (`gpt-4.1-mini`: openai)."""
    if "/" in model:
        return model.split("/", 1)[0]
    route = bare_model_route(model)
    return route.provider if route else model


def route_line(spec: EndpointSpec) -> str | None:
    """The one line a run shows for a bare name LiteLLM routes (`gpt-4.1-mini: OpenAI via LiteLLM, key
    OPENAI_API_KEY`); None for every other endpoint."""
    route = bare_model_route(spec.model) if spec.kind == "litellm" and not spec.url else None
    return route.line(spec.key_var) if route else None


class LiteLLMChatClient(EndpointClient):
    """Implements the envs ChatClient protocol via `litellm.acompletion`."""

    shown_as = "model"

    def _connect(self) -> None:
        spec = self.spec
        self._litellm = import_litellm()
        check_provider_key(spec)
        # No key variable: LiteLLM reads the provider's own variable (ANTHROPIC_API_KEY, ...).
        self._api_key = api_key_for(spec) if spec.key_var else None
        self._secrets = tuple(v for v in (self._api_key, *secret_header_values(spec.headers)) if v)

    def _request(self, model: str, messages: list[Message], tools: list[dict[str, Any]] | None,
                 sampling_args: SamplingArgs | None) -> dict[str, Any]:
        if model.startswith(LITELLM_PREFIX):
            model = model[len(LITELLM_PREFIX):]
        kwargs: dict[str, Any] = {k: v for k, v in (sampling_args or {}).items() if v is not None and k not in NEVER_SENT}
        kwargs.update(model=model, messages=list(messages), num_retries=0, max_retries=0, timeout=self.timeout)
        if tools:
            kwargs["tools"] = tools
        if self.spec.url:
            kwargs["api_base"] = self.spec.url
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        if self.spec.headers:
            kwargs["extra_headers"] = dict(self.spec.headers)
        if self.return_token_ids:
            kwargs["extra_body"] = {**(kwargs.get("extra_body") or {}), "return_token_ids": True}
            kwargs.setdefault("logprobs", True)
        return kwargs

    async def chat(self, messages: list[Message], *, model: str, tools: list[dict[str, Any]] | None = None,
                   sampling_args: SamplingArgs | None = None) -> ChatResponse:
        kwargs = self._request(model, messages, tools, sampling_args)
        where = self.spec.url or f"litellm provider {kwargs['model'].split('/')[0]}"
        return await self._send(lambda: self._litellm.acompletion(**kwargs), chat_response_from, model=kwargs["model"],
                                describe=f"{kwargs['model']} via litellm", where=where)

