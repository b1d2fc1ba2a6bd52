"""The scripted server answers `stream: true` with server-sent events (verifiers 0.4.0's chat program
streams), and everything else as before."""

from __future__ import annotations

import openai
import pytest

from tests.support.scripted_server import ScriptedOpenAIServer

MESSAGES = [{"role": "user", "content": "hello there world"}]


def test_streamed_chat_reply_is_the_same_reply_in_chunks_with_usage_when_asked():
    with ScriptedOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                     stream_options={"include_usage": True}))
        plain = client.chat.completions.create(model="m", messages=MESSAGES)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content == "<reversed_text>dlrow ereht olleh</reversed_text>"
    assert len(chunks) > 3 and chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_streamed_tool_calls_and_completions():
    def reply(request):
        return {"tool_calls": [{"function": {"name": "lookup", "arguments": {"q": "x"}}}]}

    with ScriptedOpenAIServer(reply=reply) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    calls = [t for c in chunks for t in c.choices[0].delta.tool_calls or []]
    assert [(t.id, t.function.name, t.function.arguments) for t in calls] == [("call_0", "lookup", '{"q": "x"}')]
    assert chunks[-1].choices[0].finish_reason == "tool_calls" and all(c.usage is None for c in chunks)
    with ScriptedOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        text = "".join(c.choices[0].text for c in client.completions.create(model="m", prompt="abc def", stream=True))
    assert text == "<reversed_text>fed cba</reversed_text>"


def test_a_fault_on_a_streamed_request_is_still_a_json_error():
    with ScriptedOpenAIServer(faults=["429"]) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
