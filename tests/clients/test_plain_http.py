"""The two request paths of OpenAIChatClient: plain_http.py for plain-http endpoints, the OpenAI SDK for the
rest. Both send the same body, read the same reply and fail the same way; the plain one never loads openai."""

from __future__ import annotations

import subprocess
import sys

import pytest

from prime_cli.clients import FatalEndpointError
from prime_cli.clients import openai_client as openai_client_module
from prime_cli.clients.plain_http import usable_for
from tests.support.scripted_server import ScriptedOpenAIServer

from .conftest import USER, retry_lines

SAMPLING = {"max_tokens": 2, "temperature": 0.3, "top_k": 20, "stream": True, "seed": None, "extra_body": {"min_p": 0.1}}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(params=["plain", "sdk"])
def path(request, monkeypatch):
    if request.param == "sdk":
        monkeypatch.setattr(openai_client_module, "usable_for", lambda url: False)
    return request.param


async def test_both_paths_send_the_same_body_and_read_the_same_reply(make_client, path):
    with ScriptedOpenAIServer(token_ids=True) as server:
        client = make_client(server.url, return_token_ids=True, headers={"X-Team": "a"})
        assert (client._plain is not None) == (path == "plain")
        chat = await client.chat(USER, model="m", tools=TOOLS, sampling_args=SAMPLING)
        text = await client.complete("abc def", model="m", sampling_args={"max_tokens": 10})
    chat_body, text_body = (request["json"] for request in server.requests)
    assert chat_body == {"model": "m", "messages": USER, "tools": TOOLS, "max_tokens": 2, "temperature": 0.3,
                         "top_k": 20, "min_p": 0.1, "return_token_ids": True, "logprobs": True}
    assert text_body == {"model": "m", "prompt": "abc def", "max_tokens": 10, "return_token_ids": True, "logprobs": 0}
    assert server.requests[0]["headers"]["x-team"] == "a"
    assert chat.finish_reason == "length" and chat.usage.as_dict() == {"prompt_tokens": 4, "completion_tokens": 2}
    assert chat.completion_token_ids and len(chat.completion_logprobs) == len(chat.completion_token_ids)
    assert text.message["role"] == "assistant" and text.prompt_token_ids


@pytest.mark.parametrize(("fault", "reason"), [("429", "HTTP 429"), ("500", "HTTP 500"), ("timeout", "timeout"),
                                               ("drop", "dropped connection"), ("garbage", "malformed response")])
async def test_both_paths_retry_each_fault_for_the_same_reason(make_client, retry_log, path, fault, reason):
    with ScriptedOpenAIServer(faults=[fault, "ok"], timeout_delay=4.0) as server:
        response = await make_client(server.url, timeout=1.0).chat(USER, model="m")
    assert response.message["content"].startswith("<reversed_text>")
    (line,) = retry_lines(retry_log)
    assert line.startswith(f"retry 1/3 for m at {server.url} after {reason} (waiting ")


async def test_both_paths_find_a_closed_port_unreachable(make_client, path):
    with ScriptedOpenAIServer() as server:
        url = server.url
    with pytest.raises(FatalEndpointError, match="connection refused"):
        await make_client(url).chat(USER, model="m")


async def test_plain_path_keeps_one_connection_alive_across_calls(make_client):
    with ScriptedOpenAIServer() as server:
        client = make_client(server.url)
        for _ in range(5):
            await client.chat(USER, model="m")
        assert len(client._plain._idle) == 1
    assert len(server.requests) == 5


def test_sdk_serves_https_and_proxied_endpoints(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert usable_for("http://127.0.0.1:8000/v1") and not usable_for("https://api.openai.com/v1")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not usable_for("http://127.0.0.1:8000/v1")


def test_plain_path_never_imports_openai_even_on_an_error():
    code = ("import asyncio, sys\n"
            "from prime_cli.clients import EndpointSpec, OpenAIChatClient, FatalEndpointError\n"
            "from tests.support.scripted_server import ScriptedOpenAIServer\n"
            "async def main():\n"
            "    with ScriptedOpenAIServer(api_key='right') as server:\n"
            "        client = OpenAIChatClient(EndpointSpec('m', 'm', server.url, None, {}))\n"
            "        try:\n"
            "            await client.chat([{'role': 'user', 'content': 'hi'}], model='m')\n"
            "        except FatalEndpointError:\n"
            "            pass\n"
            "        await client.aclose()\n"
            "asyncio.run(main())\n"
            "print(sorted(m for m in ('openai', 'httpx', 'httpx2') if m in sys.modules))")
    env = {name: value for name, value in __import__("os").environ.items() if "proxy" not in name.lower()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == "[]"


async def test_a_pydantic_message_is_sent_as_its_set_fields(make_client, path):
    from pydantic import BaseModel

    class Message(BaseModel):
        role: str
        content: str | None = None
        name: str | None = None

    with ScriptedOpenAIServer() as server:
        await make_client(server.url).chat([Message(role="user", content="hello brave new world")], model="m")
    assert server.requests[0]["json"]["messages"] == USER
