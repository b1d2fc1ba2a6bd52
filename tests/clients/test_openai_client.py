"""OpenAIChatClient against a real HTTP server: replies, tool calls, token ids, headers, concurrency."""

from __future__ import annotations

import asyncio
import json

import pytest

from prime_cli.clients import resolve_model
from prime_cli.envs.types import ChatClient, CompletionClient
from tests.support.scripted_server import ScriptedOpenAIServer, token_id

from .conftest import SENTINEL, USER


async def test_text_reply_and_usage(make_client):
    with ScriptedOpenAIServer() as server:
        client = make_client(server.url)
        assert isinstance(client, ChatClient) and isinstance(client, CompletionClient)
        response = await client.chat(USER, model="m")
    assert response.message == {"role": "assistant", "content": "<reversed_text>dlrow wen evarb olleh</reversed_text>"}
    assert response.finish_reason == "stop"
    assert response.usage.as_dict() == {"prompt_tokens": 4, "completion_tokens": 4}
    assert response.prompt_token_ids is None and response.completion_token_ids is None
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["json"]["messages"] == USER and request["json"]["model"] == "m"
    assert request["headers"]["authorization"] == "Bearer EMPTY"


async def test_tool_calls_and_reasoning_come_back_as_plain_dicts(make_client):
    def reply(request):
        assert request["tools"][0]["function"]["name"] == "lookup"
        return {"content": None, "reasoning_content": "I should look it up.",
                "tool_calls": [{"id": "call_7", "type": "function", "function": {"name": "lookup", "arguments": {"q": "x"}}}]}

    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    with ScriptedOpenAIServer(reply) as server:
        response = await make_client(server.url).chat(USER, model="m", tools=tools)
    assert response.finish_reason == "tool_calls"
    assert response.message["tool_calls"] == [
        {"id": "call_7", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]
    assert type(response.message["tool_calls"][0]) is dict
    assert response.message["reasoning_content"] == "I should look it up."
    assert json.dumps(response.message)  # JSON-friendly for results.jsonl


async def test_token_ids_and_logprobs(make_client):
    with ScriptedOpenAIServer(token_ids=True) as server:
        client = make_client(server.url, return_token_ids=True)
        response = await client.chat(USER, model="m")
    body = server.requests[0]["json"]
    assert body["return_token_ids"] is True and body["logprobs"] is True
    assert response.prompt_token_ids == [token_id(w) for w in "hello brave new world".split()]
    completion_words = response.message["content"].split()
    assert response.completion_token_ids == [token_id(w) for w in completion_words]
    assert len(response.completion_logprobs) == len(completion_words) == response.usage.completion_tokens
    assert all(isinstance(v, float) and v < 0 for v in response.completion_logprobs)


async def test_sampling_args_pass_through_and_extra_body_merges(make_client):
    with ScriptedOpenAIServer() as server:
        client = make_client(server.url)
        sampling = {"max_tokens": 2, "temperature": 0.3, "top_p": 0.9, "seed": 5, "stop": ["</x>"],
                    "top_k": 20, "stream": True, "presence_penalty": None, "extra_body": {"min_p": 0.1}}
        response = await client.chat(USER, model="m", sampling_args=sampling)
    body = server.requests[0]["json"]
    assert {k: body[k] for k in ("max_tokens", "temperature", "top_p", "seed", "stop", "top_k", "min_p")} == {
        "max_tokens": 2, "temperature": 0.3, "top_p": 0.9, "seed": 5, "stop": ["</x>"], "top_k": 20, "min_p": 0.1}
    assert "stream" not in body and "presence_penalty" not in body and "extra_body" not in body
    assert response.finish_reason == "length" and response.usage.completion_tokens == 2
    assert sampling["extra_body"] == {"min_p": 0.1}  # the caller's dict is not modified


async def test_complete_uses_the_completions_endpoint(make_client):
    with ScriptedOpenAIServer(token_ids=True) as server:
        client = make_client(server.url, return_token_ids=True)
        response = await client.complete("abc def", model="m", sampling_args={"max_tokens": 10})
    assert server.requests[0]["path"] == "/v1/completions"
    assert server.requests[0]["json"]["prompt"] == "abc def"
    assert response.message == {"role": "assistant", "content": "<reversed_text>fed cba</reversed_text>"}
    assert response.completion_token_ids == [token_id(w) for w in response.message["content"].split()]
    assert response.completion_logprobs is not None and len(response.completion_logprobs) == 2
    assert response.prompt_token_ids == [token_id("abc"), token_id("def")]


async def test_extra_headers_are_sent(make_client, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCRIPTED_KEY", SENTINEL)
    with ScriptedOpenAIServer(api_key=SENTINEL) as server:
        (spec,) = resolve_model("m", base_url=server.url, key_var="SCRIPTED_KEY", headers={"X-Team": "evals"})
        client = make_client(spec.url, key_var=spec.key_var, headers=spec.headers)
        await client.chat(USER, model="m")
    headers = server.requests[0]["headers"]
    assert headers["x-team"] == "evals"
    assert headers["authorization"] == f"Bearer {SENTINEL}"
    assert SENTINEL not in repr(client) and "SCRIPTED_KEY" in repr(client)


@pytest.mark.parametrize(("limit", "expected"), [(3, 3), (32, 10)])
async def test_concurrency_limit_is_respected(make_client, limit, expected):
    with ScriptedOpenAIServer(delay=0.15) as server:
        client = make_client(server.url, max_concurrent=limit)
        responses = await asyncio.gather(*(client.chat(USER, model="m") for _ in range(10)))
    assert len(responses) == 10 and len(server.requests) == 10
    assert server.max_in_flight == expected


async def test_client_works_across_event_loops_of_its_semaphore(make_client):
    with ScriptedOpenAIServer() as server:
        client = make_client(server.url, max_concurrent=1)
        first = client._limit.get()
        await client.chat(USER, model="m")
        assert client._limit.get() is first  # one semaphore per running loop, created lazily
        client._limit._loop = object()  # pretend the loop changed (e.g. a new asyncio.run)
        assert client._limit.get() is not first


async def test_models_endpoint_lists_accepted_models():
    import httpx

    with ScriptedOpenAIServer(models=["a", "b"]) as server:
        async with httpx.AsyncClient() as http:
            listing = (await http.get(f"{server.url}/models")).json()
    assert [m["id"] for m in listing["data"]] == ["a", "b"]
