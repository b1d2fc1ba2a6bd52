"""prime_cli.clients.endpoints: the model flags of any engine (plain arguments) to specs, checks and a pool."""

from __future__ import annotations

import pytest

from prime_cli.clients import ClientConfigError, ClientPool
from prime_cli.clients.endpoints import check_endpoints, endpoint_specs, open_pool, secrets_of

REGISTRY = """
[[endpoint]]
endpoint_id = "qwen"
model = "Qwen/Qwen3-8B"
url = "http://gpu-1:8000/v1"
key = "QWEN_KEY"
headers = { "Authorization" = "Bearer team-token-1234" }

[[endpoint]]
endpoint_id = "qwen"
model = "Qwen/Qwen3-8B"
url = "http://gpu-2:8000/v1"
key = "QWEN_KEY"
"""


@pytest.fixture
def registry(tmp_path):
    path = tmp_path / "endpoints.toml"
    path.write_text(REGISTRY)
    return str(path)


def test_registry_replicas_become_one_pool_with_the_secrets_to_redact(registry, monkeypatch):
    monkeypatch.setenv("QWEN_KEY", "sk-qwen-secret")
    specs = endpoint_specs("qwen", endpoints_path=registry, headers={"X-Run": "7"})
    assert [s.url for s in specs] == ["http://gpu-1:8000/v1", "http://gpu-2:8000/v1"]
    assert all(s.headers["X-Run"] == "7" for s in specs)
    assert sorted(set(secrets_of(specs))) == ["Bearer team-token-1234", "sk-qwen-secret"]
    pool = open_pool(specs, max_concurrent=3, max_retries=1, timeout=5.0)
    assert isinstance(pool, ClientPool) and pool.endpoint_count == 2


def test_the_embedded_model_needs_its_server_url():
    with pytest.raises(ClientConfigError, match="the built-in model 'local' is not served here"):
        endpoint_specs("local")
    (spec,) = endpoint_specs("local", base_url="http://127.0.0.1:8123/v1")
    assert spec.url == "http://127.0.0.1:8123/v1" and spec.key_var is None
    check_endpoints("local")  # checked against a placeholder loopback URL: no key needed, no error


def test_check_names_the_role_the_missing_key_and_a_close_endpoint_id(registry, monkeypatch):
    monkeypatch.delenv("QWEN_KEY", raising=False)
    with pytest.raises(ClientConfigError, match=r"^reflection model -M qwen: .*QWEN_KEY"):
        check_endpoints("qwen", endpoints_path=registry, role="reflection model -M")
    with pytest.raises(ClientConfigError, match=r"unknown model 'qwne': .*did you mean 'qwen'\?"):
        check_endpoints("qwne", endpoints_path=registry)
    assert secrets_of(endpoint_specs("m", base_url="http://localhost:9/v1", key_var="EMPTY_VAR")) == []
