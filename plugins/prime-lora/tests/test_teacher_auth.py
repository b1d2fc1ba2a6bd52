"""A distillation teacher behind an API key: the key comes from the variable the config names, never the config."""

from __future__ import annotations

import asyncio

import pytest

from prime_lora.orchestrator.teacher import TeacherClient, TeacherEndpoint, TeacherError


def test_a_teachers_api_key_is_read_from_its_variable_and_sent_as_a_bearer_token(monkeypatch):
    endpoint = TeacherEndpoint("http://127.0.0.1:9/v1", "big", "TEACHER_KEY")
    monkeypatch.delenv("TEACHER_KEY", raising=False)
    with pytest.raises(TeacherError, match="TEACHER_KEY is not set"):
        endpoint.headers()
    monkeypatch.setenv("TEACHER_KEY", "sk-test")
    client = TeacherClient(endpoint)
    assert client.http.headers["Authorization"] == "Bearer sk-test"
    assert "Authorization" not in TeacherClient(TeacherEndpoint("http://127.0.0.1:9/v1", "big")).http.headers
    asyncio.run(client.aclose())
