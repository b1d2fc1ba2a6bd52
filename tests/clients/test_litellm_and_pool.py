"""The optional LiteLLM client (with a stand-in litellm module) and the replica pool."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest

from prime_cli.clients import (
    ClientConfigError,
    ClientPool,
    EndpointSpec,
    LiteLLMChatClient,
    OpenAIChatClient,
    RetryPolicy,
    make_client,
    resolve_model,
)
from tests.support.scripted_server import ScriptedOpenAIServer

from .conftest import SENTINEL, USER, retry_lines
from .test_retry import FakeStatusError

LITELLM_SPEC = EndpointSpec("litellm/anthropic/claude", "anthropic/claude", "", None, {}, "litellm")


def test_missing_litellm_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` raise ImportError
    with pytest.raises(ClientConfigError) as info:
        LiteLLMChatClient(LITELLM_SPEC)
    assert str(info.value) == "litellm is not installed; reinstall prime: pip install -e . (litellm is one of prime's dependencies)"
    (spec,) = resolve_model("litellm/anthropic/claude")
    with pytest.raises(ClientConfigError, match="litellm is not installed"):
        ClientPool([spec])


def fake_litellm(replies):
    calls = []

    async def acompletion(**kwargs):
        calls.append(kwargs)
        reply = replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    return SimpleNamespace(acompletion=acompletion), calls


def completion(text):
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "claude",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})


async def test_litellm_client_calls_acompletion_through_the_retry_policy(monkeypatch, caplog):
    caplog.set_level("WARNING", logger="prime_cli.clients")
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    monkeypatch.setenv("ANTHROPIC_KEY_VAR", SENTINEL)
    module, calls = fake_litellm([FakeStatusError(429, "slow down"), completion("hi")])
    monkeypatch.setitem(sys.modules, "litellm", module)
    spec = EndpointSpec("c", "anthropic/claude", "", "ANTHROPIC_KEY_VAR", {"X-Team": "evals"}, "litellm")
    client = make_client(spec, retry=RetryPolicy(initial_delay=0.001), max_concurrent=4, timeout=30.0)
    assert isinstance(client, LiteLLMChatClient)
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    response = await client.chat(USER, model="litellm/anthropic/claude", sampling_args={"temperature": 0.1, "top_p": None})
    assert response.message == {"role": "assistant", "content": "hi"} and response.usage.prompt_tokens == 3
    assert len(calls) == 2 and len(retry_lines(caplog)) == 1
    sent = calls[-1]
    assert sent["model"] == "anthropic/claude" and sent["messages"] == USER
    assert (sent["num_retries"], sent["timeout"], sent["temperature"]) == (0, 30.0, 0.1)
    assert "top_p" not in sent and "api_base" not in sent
    assert sent["api_key"] == SENTINEL and sent["extra_headers"] == {"X-Team": "evals"}
    assert SENTINEL not in repr(client)
    await client.aclose()


def test_make_client_rejects_unknown_kind():
    with pytest.raises(ClientConfigError, match="unknown client kind 'grpc'"):
        make_client(EndpointSpec("m", "m", "http://h/v1", None, {}, "grpc"))


async def test_pool_round_robins_example_groups_over_replicas(fast_retry):
    with ScriptedOpenAIServer() as first, ScriptedOpenAIServer() as second:
        specs = [EndpointSpec("qwen", "model-a", first.url, None), EndpointSpec("qwen", "model-b", second.url, None)]
        pool = ClientPool(specs, max_concurrent=4, retry=fast_retry)
        assert pool.endpoint_count == 2
        picks = [pool.for_group(group) for group in range(5)]
        assert [model for _, model in picks] == ["model-a", "model-b", "model-a", "model-b", "model-a"]
        assert picks[0][0] is picks[2][0] and picks[0][0] is not picks[1][0]
        assert all(isinstance(client, OpenAIChatClient) and client.max_concurrent == 4 for client, _ in picks)
        for client, model in picks:
            await client.chat(USER, model=model)
        await pool.aclose()
    assert [r["json"]["model"] for r in first.requests] == ["model-a"] * 3
    assert [r["json"]["model"] for r in second.requests] == ["model-b"] * 2


def test_pool_surfaces_config_errors_before_any_request(monkeypatch):
    monkeypatch.delenv("NOT_SET_KEY_VAR", raising=False)
    with pytest.raises(ClientConfigError, match="NOT_SET_KEY_VAR is not set"):
        ClientPool([EndpointSpec("m", "m", "https://api.example.com/v1", "NOT_SET_KEY_VAR")])
    with pytest.raises(ClientConfigError, match="no endpoint"):
        ClientPool([])


@pytest.mark.parametrize("client_class", [OpenAIChatClient, LiteLLMChatClient])
async def test_both_clients_share_one_constructor_contract(client_class, monkeypatch):
    """The endpoint spec, then keyword-only settings with the same names and defaults; both close with `async with`."""
    import inspect

    monkeypatch.setitem(sys.modules, "litellm", fake_litellm([])[0])
    parameters = list(inspect.signature(client_class).parameters.values())
    assert [(p.name, p.kind, p.default) for p in parameters] == [
        ("spec", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("max_concurrent", inspect.Parameter.KEYWORD_ONLY, 32),
        ("retry", inspect.Parameter.KEYWORD_ONLY, None),
        ("timeout", inspect.Parameter.KEYWORD_ONLY, 600.0),
        ("return_token_ids", inspect.Parameter.KEYWORD_ONLY, False),
    ]
    kind = "litellm" if client_class is LiteLLMChatClient else "openai"
    spec = EndpointSpec("m", "m", "http://127.0.0.1:9/v1", None, {}, kind)
    with pytest.raises(ValueError, match="max_concurrent must be at least 1"):
        client_class(spec, max_concurrent=0)
    async with client_class(spec, max_concurrent=2, timeout=5.0) as client:
        assert (client.max_concurrent, client.timeout, client.return_token_ids) == (2, 5.0, False)
        assert client.retry_counts.retries == 0
