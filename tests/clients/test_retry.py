"""The retry policy in isolation: Retry-After parsing, backoff, redaction and classification."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import time
from types import SimpleNamespace

import pytest

from prime_cli.clients import (
    FatalEndpointError,
    MalformedResponseError,
    RetryPolicy,
    call_with_retries,
    classify,
    redact,
    secret_header_values,
)
from prime_cli.clients.openai_client import chat_response_from, completion_response_from
from prime_cli.clients.retry import retry_after_seconds
from prime_cli.envs.errors import ModelError, OverlongPromptError

from .conftest import retry_lines


class FakeStatusError(Exception):
    """Duck-types an SDK status error: status_code, body and response.headers."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(f"Error code: {status} - {message}")
        self.status_code = status
        self.body = {"message": message, "code": code}
        self.response = SimpleNamespace(headers=headers or {})


def test_retry_after_seconds_and_http_date():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0.5") == 0.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    now = time.time()
    future = email.utils.formatdate(now + 10, usegmt=True)
    assert 8.5 <= retry_after_seconds(future, now=now) <= 10.5
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


def test_backoff_grows_exponentially_with_jitter_and_cap():
    policy = RetryPolicy(initial_delay=1.0, max_delay=5.0)
    for _ in range(50):
        assert 0.75 <= policy.backoff(1) <= 1.25
        assert 1.5 <= policy.backoff(2) <= 2.5
        assert policy.backoff(6) == 5.0
    assert len({policy.backoff(1) for _ in range(20)}) > 1  # jittered


def test_redact_masks_secrets_and_bearer_tokens():
    text = "bad key sk-SENTINEL-123 sent as\nAuthorization: Bearer abc.def and my-secret-value"
    cleaned = redact(text, ["my-secret-value"])
    assert "SENTINEL" not in cleaned and "abc.def" not in cleaned and "my-secret-value" not in cleaned
    assert "\n" not in cleaned and "Bearer ***" in cleaned


@pytest.mark.parametrize(
    ("status", "message", "code", "kind", "retry"),
    [
        (429, "slow down", None, None, True),
        (500, "boom", None, None, True),
        (503, "overloaded", None, None, True),
        (400, "This model's maximum context length is 2048 tokens.", None, OverlongPromptError, False),
        (400, "The decoder prompt (length 5000) is longer than the maximum model length of 4096.", None, OverlongPromptError, False),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", None, OverlongPromptError, False),
        (400, "anything", "context_length_exceeded", OverlongPromptError, False),
        (400, "temperature must be <= 2", None, ModelError, False),
        (422, "unprocessable", None, ModelError, False),
        (401, "invalid key", None, FatalEndpointError, False),
        (403, "forbidden", None, FatalEndpointError, False),
        (404, "The model `x` does not exist", "model_not_found", FatalEndpointError, False),
    ],
)
def test_classify_status_errors(status, message, code, kind, retry):
    verdict = classify(FakeStatusError(status, message, code), url="http://h/v1", model="x")
    assert verdict.retry is retry
    assert verdict.reason == f"HTTP {status}"
    if kind is None:
        assert verdict.error is None
    else:
        assert type(verdict.error) is kind


def test_classify_404_without_model_hint_points_at_the_base_url():
    verdict = classify(FakeStatusError(404, "Not Found"), url="http://h:8000", model="x")
    assert "check the base URL" in str(verdict.error)
    model_missing = classify(FakeStatusError(404, "The model `gpt-x` does not exist", "model_not_found"),
                             url="http://127.0.0.1:8000/v1", model="gpt-x")
    assert str(model_missing.error) == "model 'gpt-x' not found at http://127.0.0.1:8000/v1 (HTTP 404)"


def test_classify_reads_retry_after_headers():
    assert classify(FakeStatusError(429, "x", headers={"retry-after": "7"})).retry_after == 7.0
    assert classify(FakeStatusError(429, "x", headers={"retry-after-ms": "250"})).retry_after == 0.25
    assert classify(FakeStatusError(429, "x")).retry_after is None
    assert classify(FakeStatusError(503, "x", headers={"retry-after": "3"})).retry_after == 3.0


def test_classify_unknown_exception_is_not_retried():
    error = KeyError("bug")
    verdict = classify(error)
    assert verdict.retry is False and verdict.error is error


async def test_call_with_retries_caps_retry_after_at_max_delay(caplog):
    caplog.set_level(logging.WARNING, logger="prime_cli.clients")
    calls = []

    async def flaky():
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise FakeStatusError(429, "slow down", headers={"retry-after": "100"})
        return "ok"

    started = time.monotonic()
    assert await call_with_retries(flaky, RetryPolicy(initial_delay=0.01, max_delay=0.05), describe="m at u") == "ok"
    assert time.monotonic() - started < 1.0
    [line] = retry_lines(caplog)  # 0.05 s and a jitter of up to 0.01 s
    assert re.fullmatch(r"retry 1/3 for m at u after HTTP 429 \(waiting 0\.0[56]s\)", line), line


async def test_calls_told_the_same_retry_after_come_back_spread_out_and_never_early(monkeypatch):
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay):
        slept.append(delay)
        await real_sleep(0)

    def told_to_wait_two_seconds():
        calls = 0

        async def call():
            nonlocal calls
            calls += 1
            if calls == 1:
                raise FakeStatusError(429, "slow down", headers={"retry-after": "2"})
            return "ok"

        return call

    monkeypatch.setattr(asyncio, "sleep", sleep)
    policy = RetryPolicy(initial_delay=0.5, max_delay=30.0)
    rollouts = [call_with_retries(told_to_wait_two_seconds(), policy, describe="m") for _ in range(50)]
    assert await asyncio.gather(*rollouts) == ["ok"] * 50
    assert len(slept) == 50 and min(slept) >= 2.0  # never sooner than the server asked
    assert max(slept) <= 2.5 and len(set(slept)) > 25  # a bounded spread, not one instant


async def test_call_with_retries_raises_model_error_when_exhausted(caplog):
    caplog.set_level(logging.WARNING, logger="prime_cli.clients")
    attempts = 0

    async def always_500():
        nonlocal attempts
        attempts += 1
        raise FakeStatusError(500, "boom")

    with pytest.raises(ModelError) as info:
        await call_with_retries(always_500, RetryPolicy(max_retries=2, initial_delay=0.001), describe="m at u")
    assert type(info.value) is ModelError
    assert attempts == 3 and len(retry_lines(caplog)) == 2
    assert "failed after 3 attempts" in str(info.value) and "HTTP 500" in str(info.value)


async def test_call_with_retries_does_not_swallow_cancellation():
    async def hang():
        await asyncio.sleep(10)

    task = asyncio.ensure_future(call_with_retries(hang, RetryPolicy(), describe="m"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class ConnectError(Exception):
    """Named like httpx's ConnectError, which the SDK wraps in APIConnectionError."""


def connection_error(cause: BaseException) -> BaseException:
    import openai

    request = SimpleNamespace(method="POST", url="http://h/v1/chat/completions")
    try:
        raise openai.APIConnectionError(request=request) from cause
    except openai.APIConnectionError as exc:
        return exc


def test_classify_connect_failures_found_inside_exception_groups():
    group = ExceptionGroup("all failed", [ConnectionRefusedError(111, "Connection refused")])
    inner = ConnectError("All connection attempts failed")
    inner.__cause__ = group
    verdict = classify(connection_error(inner))
    assert (verdict.retry, verdict.reason, verdict.unreachable) == (True, "connection refused", "connection refused")
    dns = classify(connection_error(ConnectError("[Errno -2] Name or service not known")))
    assert dns.unreachable == "host name not resolved"
    dropped = classify(connection_error(ConnectionResetError("reset by peer")))
    assert (dropped.reason, dropped.unreachable) == ("dropped connection", None)


@pytest.mark.parametrize("response", ["<html>bad gateway</html>", None, {"choices": []}, {"choices": [{"index": 0}]}])
def test_responses_without_a_choice_are_malformed_and_retried(response):
    with pytest.raises(MalformedResponseError) as info:
        chat_response_from(response)
    assert classify(info.value).retry is True
    with pytest.raises(MalformedResponseError):
        completion_response_from(response)


def test_credential_headers_are_redacted():
    headers = {"X-API-Key": "hdr-secret-1", "Authorization": "Basic abcd1234", "X-Team": "evals"}
    assert secret_header_values(headers) == ["hdr-secret-1", "Basic abcd1234"]


async def test_retry_counts_record_kinds_retried_calls_and_calls_that_gave_up():
    from prime_cli.clients import RetryCounts

    counts = RetryCounts()
    policy = RetryPolicy(max_retries=2, initial_delay=0.001)

    def script(*steps):
        pending = list(steps)

        async def call():
            step = pending.pop(0)
            if isinstance(step, BaseException):
                raise step
            return step
        return call

    assert await call_with_retries(script("ok"), policy, describe="m", counts=counts) == "ok"
    assert await call_with_retries(script(FakeStatusError(503, "busy"), TimeoutError(), "ok"), policy,
                                   describe="m", counts=counts) == "ok"
    with pytest.raises(ModelError):
        await call_with_retries(script(*[FakeStatusError(429, "slow")] * 3), policy, describe="m", counts=counts)
    with pytest.raises(ModelError):  # a 400 is never retried: not counted
        await call_with_retries(script(FakeStatusError(400, "bad")), policy, describe="m", counts=counts)
    assert counts.as_dict() == {"calls_retried": 2, "retries": 4, "gave_up": 1,
                                "by_kind": {"429": 2, "5xx": 1, "timeout": 1}}
    resumed = RetryCounts().add(counts.as_dict()).add(counts)
    assert resumed.as_dict()["by_kind"] == {"429": 4, "5xx": 2, "timeout": 2} and resumed.gave_up == 2
