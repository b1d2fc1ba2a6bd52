"""Shared fixtures of the client tests: a fast retry policy and a client factory."""

from __future__ import annotations

import logging

import pytest

from prime_cli.clients import EndpointSpec, OpenAIChatClient, RetryPolicy

SENTINEL = "sk-SENTINEL-123"
USER = [{"role": "user", "content": "hello brave new world"}]


@pytest.fixture
def fast_retry() -> RetryPolicy:
    return RetryPolicy(max_retries=3, initial_delay=0.01, max_delay=0.05)


@pytest.fixture
def retry_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="prime_cli.clients")
    return caplog


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "prime_cli.clients" and r.getMessage().startswith("retry ")]


@pytest.fixture
async def make_client(fast_retry):
    """Build OpenAIChatClients against a URL; closes them at the end of the test."""
    clients: list[OpenAIChatClient] = []

    def build(url: str, *, key_var: str | None = None, headers: dict[str, str] | None = None,
              model: str = "m", **kwargs) -> OpenAIChatClient:
        kwargs.setdefault("retry", fast_retry)
        client = OpenAIChatClient(EndpointSpec(model, model, url, key_var, dict(headers or {})), **kwargs)
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.aclose()
