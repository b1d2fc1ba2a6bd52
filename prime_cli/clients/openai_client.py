"""A ChatClient for any OpenAI-compatible server (OpenAI, vLLM, OpenRouter, ...).

`openai` is imported when a client is built, never when this module is imported, and only for endpoints
that plain_http.py does not serve (it takes plain-http URLs without a proxy: local servers, where the SDK's
import and per-request CPU are most of a run's time).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from prime_cli.envs.types import ChatResponse, Message, SamplingArgs, Usage

from .base import EndpointClient
from .errors import MalformedResponseError
from .plain_http import PlainHTTPClient, usable_for
from .registry import api_key_for, secret_header_values

NEVER_SENT = {"stream", "stream_options"}
"""Sampling arguments dropped: the rollout loop needs whole responses."""


def field_of(obj: Any, name: str) -> Any:
    """A field of an SDK object or dict, including extra fields a vLLM server adds (model_extra)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return value


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list | tuple):
        return None
    try:
        return [int(v) for v in value]
    except (TypeError, ValueError):
        return None


def tool_call_dict(call: Any) -> dict[str, Any]:
    function = field_of(call, "function")
    arguments = field_of(function, "arguments")
    return {
        "id": field_of(call, "id") or "",
        "type": field_of(call, "type") or "function",
        "function": {"name": field_of(function, "name") or "", "arguments": arguments if arguments is not None else ""},
    }


def message_dict(message: Any) -> Message:
    """The assistant message as a plain OpenAI-style dict."""
    result: Message = {"role": field_of(message, "role") or "assistant", "content": field_of(message, "content")}
    tool_calls = field_of(message, "tool_calls")
    if tool_calls:
        result["tool_calls"] = [tool_call_dict(call) for call in tool_calls]
    reasoning = field_of(message, "reasoning_content")
    if reasoning is None:
        reasoning = field_of(message, "reasoning")
    if isinstance(reasoning, str) and reasoning:
        result["reasoning_content"] = reasoning
    return result


def usage_of(response: Any) -> Usage | None:
    usage = field_of(response, "usage")
    if usage is None:
        return None
    return Usage(prompt_tokens=int(field_of(usage, "prompt_tokens") or 0),
                 completion_tokens=int(field_of(usage, "completion_tokens") or 0))


def first_choice(response: Any) -> Any:
    choices = field_of(response, "choices")
    if isinstance(response, str | bytes) or not choices:
        raise MalformedResponseError("the server's answer has no choices")
    return choices[0]


def chat_response_from(response: Any) -> ChatResponse:
    """Convert an OpenAI/LiteLLM chat completion into the envs ChatResponse."""
    choice = first_choice(response)
    message = field_of(choice, "message")
    if message is None:
        raise MalformedResponseError("the server's answer has no message")
    logprobs = None
    content = field_of(field_of(choice, "logprobs"), "content")
    if content:
        logprobs = [float(field_of(item, "logprob")) for item in content]
    return ChatResponse(
        message=message_dict(message),
        finish_reason=field_of(choice, "finish_reason"),
        usage=usage_of(response),
        prompt_token_ids=_int_list(field_of(response, "prompt_token_ids") or field_of(choice, "prompt_token_ids")),
        completion_token_ids=_int_list(field_of(choice, "token_ids")),
        completion_logprobs=logprobs,
        raw=response,
    )


def completion_response_from(response: Any) -> ChatResponse:
    """Convert a text completion (`/v1/completions`) into a ChatResponse."""
    choice = first_choice(response)
    text = field_of(choice, "text")
    if text is None:
        raise MalformedResponseError("the server's answer has no text")
    token_logprobs = field_of(field_of(choice, "logprobs"), "token_logprobs")
    return ChatResponse(
        message={"role": "assistant", "content": text},
        finish_reason=field_of(choice, "finish_reason"),
        usage=usage_of(response),
        prompt_token_ids=_int_list(field_of(choice, "prompt_token_ids") or field_of(response, "prompt_token_ids")),
        completion_token_ids=_int_list(field_of(choice, "token_ids")),
        completion_logprobs=[float(v) for v in token_logprobs if v is not None] if token_logprobs else None,
        raw=response,
    )


def split_sampling_args(sampling_args: SamplingArgs | None, accepted: set[str]) -> dict[str, Any]:
    """Keyword arguments for an SDK call: known parameters as is, the rest merged into extra_body."""
    kwargs: dict[str, Any] = {}
    extra_body: dict[str, Any] = {}
    for name, value in (sampling_args or {}).items():
        if value is None or name in NEVER_SENT:
            continue
        if name == "extra_body":
            extra_body.update(value or {})
        elif name in accepted:
            kwargs[name] = value
        else:
            extra_body[name] = value
    if extra_body:
        kwargs["extra_body"] = extra_body
    return kwargs


def _parameters(method: Any) -> set[str]:
    try:
        return set(inspect.signature(method).parameters) - {"messages", "model", "prompt"}
    except (TypeError, ValueError):  # pragma: no cover - SDK methods have signatures
        return set()


class OpenAIChatClient(EndpointClient):
    """Implements the envs ChatClient (and CompletionClient) protocol over `openai.AsyncOpenAI`."""

    def _connect(self) -> None:
        spec = self.spec
        self._api_key = api_key_for(spec)
        self._secrets = (self._api_key, *secret_header_values(spec.headers))
        self._plain: PlainHTTPClient | None = None
        if usable_for(spec.url):
            self._plain = PlainHTTPClient(spec.url, {"Authorization": f"Bearer {self._api_key}", **spec.headers})
            self._chat_params = self._completion_params = set()  # every sampling argument goes in the body
            return
        import openai  # lazy: heavy

        self._client = openai.AsyncOpenAI(base_url=spec.url, api_key=self._api_key, max_retries=0,
                                          timeout=self.timeout, default_headers=dict(spec.headers) or None)
        self._chat_params = _parameters(self._client.chat.completions.create)
        self._completion_params = _parameters(self._client.completions.create)

    async def _call(self, path: str, convert: Any, model: str, kwargs: dict[str, Any]) -> ChatResponse:
        if self._plain is None:
            endpoint = self._client.chat.completions if path == "/chat/completions" else self._client.completions
            request = lambda: endpoint.create(model=model, **kwargs)  # noqa: E731
        else:
            plain = self._plain
            body = {"model": model, **{k: v for k, v in kwargs.items() if k != "extra_body"}, **kwargs.get("extra_body", {})}

            async def request() -> Any:
                async with asyncio.timeout(self.timeout):
                    return await plain.post_json(path, body)
        return await self._send(request, convert, model=model, describe=f"{model} at {self.spec.url}", where=self.spec.url)

    async def chat(self, messages: list[Message], *, model: str, tools: list[dict[str, Any]] | None = None,
                   sampling_args: SamplingArgs | None = None) -> ChatResponse:
        kwargs = split_sampling_args(sampling_args, self._chat_params)
        kwargs["messages"] = list(messages)
        if tools:
            kwargs["tools"] = tools
        if self.return_token_ids:
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "return_token_ids": True}
            kwargs.setdefault("logprobs", True)
        return await self._call("/chat/completions", chat_response_from, model, kwargs)

    async def complete(self, prompt: str, *, model: str, sampling_args: SamplingArgs | None = None) -> ChatResponse:
        kwargs = split_sampling_args(sampling_args, self._completion_params)
        kwargs["prompt"] = prompt
        if self.return_token_ids:
            kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "return_token_ids": True}
            kwargs.setdefault("logprobs", 0)
        return await self._call("/completions", completion_response_from, model, kwargs)

    async def aclose(self) -> None:
        if self._plain is None:
            await self._client.close()
        else:
            await self._plain.aclose()
