"""The retry policy end to end: every scripted fault against a real server, and secrets kept out."""

from __future__ import annotations

import logging
import re
import socket
import time

import pytest

from prime_cli.clients import FatalEndpointError, RetryPolicy
from prime_cli.envs.errors import ModelError, OverlongPromptError
from tests.support.scripted_server import ScriptedOpenAIServer

from .conftest import SENTINEL, USER, retry_lines

CHAT = "/v1/chat/completions"


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("429", "HTTP 429"), ("500", "HTTP 500"), ("timeout", "timeout"), ("drop", "dropped connection"),
     ("garbage", "malformed response")],
)
async def test_each_fault_is_retried_then_succeeds(make_client, retry_log, fault, reason):
    with ScriptedOpenAIServer(faults=[fault, "ok"], timeout_delay=4.0) as server:
        client = make_client(server.url, timeout=1.0)  # a loaded machine may take over 0.3 s to answer the retry
        response = await client.chat(USER, model="m")
    assert response.message["content"].startswith("<reversed_text>")
    assert len(server.requests_to(CHAT)) == 2
    assert server.faults_served == [fault, "ok"]
    (line,) = retry_lines(retry_log)
    assert line.startswith(f"retry 1/3 for m at {server.url} after {reason} (waiting ")


async def test_slow_reply_within_timeout_is_not_retried(make_client, retry_log):
    with ScriptedOpenAIServer(faults=["slow"], slow_delay=0.2) as server:
        started = time.monotonic()
        response = await make_client(server.url, timeout=5).chat(USER, model="m")
    assert time.monotonic() - started >= 0.2
    assert response.finish_reason == "stop" and len(server.requests) == 1 and retry_lines(retry_log) == []


async def test_random_fault_plan_is_deterministic_and_survived(make_client, retry_log):
    plans = []
    for _ in range(2):
        with ScriptedOpenAIServer(fault_rate=0.3, seed=7) as server:
            client = make_client(server.url, retry=RetryPolicy(max_retries=8, initial_delay=0.001, max_delay=0.01))
            for _ in range(12):
                await client.chat(USER, model="m")
        plans.append(server.faults_served)
    assert plans[0] == plans[1]
    faults = [f for f in plans[0] if f != "ok"]
    assert faults and len(plans[0]) == 12 + len(faults)
    assert len(retry_lines(retry_log)) == 2 * len(faults)


async def test_429_honours_retry_after(make_client, retry_log):
    with ScriptedOpenAIServer(faults=["429", "ok"], retry_after=0.3) as server:
        started = time.monotonic()
        await make_client(server.url, retry=RetryPolicy(initial_delay=0.01, max_delay=5)).chat(USER, model="m")
        elapsed = time.monotonic() - started
    assert elapsed >= 0.3  # the policy's own backoff would have waited ~0.01 s
    [line] = retry_lines(retry_log)  # 0.3 s and a jitter of up to 10% of it
    assert re.fullmatch(rf"retry 1/3 for m at {re.escape(server.url)} after HTTP 429 \(waiting 0\.3[0-3]s\)", line)


async def test_overlong_prompt_is_not_retried(make_client, retry_log):
    with ScriptedOpenAIServer(faults=["overlong"]) as server:
        with pytest.raises(OverlongPromptError, match="maximum context length"):
            await make_client(server.url).chat(USER, model="m")
    assert len(server.requests) == 1 and retry_lines(retry_log) == []


async def test_unknown_model_is_fatal_without_retry(make_client, retry_log):
    with ScriptedOpenAIServer(models=["m"]) as server:
        with pytest.raises(FatalEndpointError) as info:
            await make_client(server.url, model="gpt-x").chat(USER, model="gpt-x")
    assert str(info.value) == f"model 'gpt-x' not found at {server.url} (HTTP 404)"
    assert len(server.requests) == 1 and retry_lines(retry_log) == []


async def test_wrong_api_key_is_fatal_without_retry_and_never_leaks(make_client, retry_log, monkeypatch):
    monkeypatch.setenv("SCRIPTED_KEY", SENTINEL)
    with ScriptedOpenAIServer(api_key="the-right-key") as server:
        with pytest.raises(FatalEndpointError) as info:
            await make_client(server.url, key_var="SCRIPTED_KEY").chat(USER, model="m")
    message = str(info.value)
    assert message.startswith(f"{server.url} rejected the API key (the key comes from $SCRIPTED_KEY) (HTTP 401)")
    assert "\n" not in message
    assert SENTINEL not in message and SENTINEL not in repr(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert len(server.requests) == 1 and retry_lines(retry_log) == []
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {SENTINEL}"  # the key was really sent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_unreachable_server_is_fatal_after_retries(make_client, retry_log):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(FatalEndpointError) as info:
        await make_client(url).chat(USER, model="m")
    assert str(info.value) == f"cannot reach {url}: connection refused"
    assert [line.split(" (")[0] for line in retry_lines(retry_log)] == [
        f"retry {n}/3 for m at {url} after connection refused" for n in (1, 2, 3)]


async def test_retries_exhausted_raise_model_error(make_client, retry_log):
    with ScriptedOpenAIServer(faults=["500"] * 4) as server:
        with pytest.raises(ModelError) as info:
            await make_client(server.url).chat(USER, model="m")
    assert type(info.value) is ModelError  # not fatal: the next rollout may succeed
    assert "failed after 4 attempts" in str(info.value) and "HTTP 500" in str(info.value)
    assert len(server.requests) == 4 and len(retry_lines(retry_log)) == 3


async def test_sentinel_key_never_reaches_logs_or_errors(make_client, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's and httpx's included
    monkeypatch.setenv("SCRIPTED_KEY", SENTINEL)
    errors: list[BaseException] = []
    with ScriptedOpenAIServer(faults=["429", "500", "drop", "ok", "garbage", "timeout", "500", "500"],
                              timeout_delay=4.0, retry_after=0) as server:
        client = make_client(server.url, key_var="SCRIPTED_KEY", timeout=1.0)
        await client.chat(USER, model="m")
        with pytest.raises(ModelError) as info:
            await client.chat(USER, model="m")
        errors.append(info.value)
    with ScriptedOpenAIServer(api_key="other") as server:
        with pytest.raises(FatalEndpointError) as info:
            await make_client(server.url, key_var="SCRIPTED_KEY").chat(USER, model="m")
        errors.append(info.value)
    with ScriptedOpenAIServer(api_key="other") as server:  # a credential passed as an extra header
        with pytest.raises(FatalEndpointError) as info:
            await make_client(server.url, headers={"Authorization": f"Bearer {SENTINEL}"}).chat(USER, model="m")
        errors.append(info.value)
        assert server.requests[0]["headers"]["authorization"] == f"Bearer {SENTINEL}"
    assert len(retry_lines(caplog)) == 6
    for record in caplog.records:
        assert SENTINEL not in record.getMessage()
        assert SENTINEL not in (record.exc_text or "")
    for error in errors:
        assert SENTINEL not in str(error) and SENTINEL not in repr(error)
        assert error.__cause__ is None
