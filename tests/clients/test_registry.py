"""The endpoint registry: parsing, validation messages, replicas, -b/-k/--header overrides, API keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prime_cli.clients import (
    ClientConfigError,
    EndpointSpec,
    api_key_for,
    load_registry,
    resolve_model,
)
from prime_cli.envs.errors import EnvConfigError, UserInputError

REGISTRY = """
[[endpoint]]
endpoint_id = "qwen"
model = "Qwen/Qwen3-8B"
url = "http://gpu-1:8000/v1"
key = "VLLM_KEY"
headers = { "X-Team" = "evals" }

[[endpoint]]
endpoint_id = "qwen"
model = "Qwen/Qwen3-8B"
url = "http://gpu-2:8000/v1"

[[endpoint]]
endpoint_id = "gpt"
model = "gpt-4.1-mini"
url = "https://api.openai.com/v1"
key = "OPENAI_API_KEY"

[[endpoint]]
endpoint_id = "claude"
model = "litellm/anthropic/claude-sonnet-4"
url = "https://api.anthropic.com"
key = "ANTHROPIC_API_KEY"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "endpoints.toml"
    path.write_text(text)
    return path


def test_load_registry_groups_replicas_in_file_order(tmp_path):
    registry = load_registry(write(tmp_path, REGISTRY))
    assert list(registry) == ["qwen", "gpt", "claude"]
    assert [spec.url for spec in registry["qwen"]] == ["http://gpu-1:8000/v1", "http://gpu-2:8000/v1"]
    first, second = registry["qwen"]
    assert first == EndpointSpec("qwen", "Qwen/Qwen3-8B", "http://gpu-1:8000/v1", "VLLM_KEY", {"X-Team": "evals"})
    assert second.key_var is None and second.headers == {}
    claude = registry["claude"][0]
    assert (claude.kind, claude.model) == ("litellm", "anthropic/claude-sonnet-4")


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ('endpoint_id = "a"\nmodle = "m"\nurl = "http://h/v1"', "endpoint 2: unknown key 'modle' (did you mean 'model'?)"),
        ('endpoint_id = "a"\nurl = "http://h/v1"', "endpoint 2: missing required key 'model'"),
        ('endpoint_id = "a"\nmodel = 3\nurl = "http://h/v1"', "endpoint 2: key 'model' must be a non-empty string"),
        ('endpoint_id = "a"\nmodel = "m"\nurl = "gpu-1:8000"', "endpoint 2: key 'url' must start with http://"),
        ('endpoint_id = "a"\nmodel = "m"\nurl = "http://h/v1"\nheaders = { X = 1 }', "endpoint 2: key 'headers' must be a table of strings"),
    ],
)
def test_invalid_block_names_file_block_and_key(tmp_path, block, expected):
    path = write(tmp_path, f'[[endpoint]]\nendpoint_id = "ok"\nmodel = "m"\nurl = "http://h/v1"\n\n[[endpoint]]\n{block}\n')
    with pytest.raises(ClientConfigError) as info:
        load_registry(path)
    message = str(info.value)
    assert str(path) in message and expected in message
    assert "\n" not in message


def test_secret_pasted_as_key_is_rejected_without_echoing_it(tmp_path):
    path = write(tmp_path, '[[endpoint]]\nendpoint_id = "a"\nmodel = "m"\nurl = "http://h/v1"\nkey = "sk-proj-abc123SECRET"\n')
    with pytest.raises(ClientConfigError) as info:
        load_registry(path)
    assert "NAME of an environment variable" in str(info.value)
    assert "abc123SECRET" not in str(info.value)


def test_invalid_toml_and_unknown_top_level_key(tmp_path):
    with pytest.raises(ClientConfigError, match=r"endpoints\.toml: invalid TOML"):
        load_registry(write(tmp_path, "[[endpoint]\n"))
    with pytest.raises(ClientConfigError, match=r"unknown top-level key 'endpoints' \(did you mean 'endpoint'\?\)"):
        load_registry(write(tmp_path, '[[endpoints]]\nendpoint_id = "a"\n'))


def test_index_tables_are_left_to_the_package_index_reader(tmp_path):
    path = write(tmp_path, '[[index]]\nname = "team"\nurl = "http://h/simple/"\n\n'
                           '[[endpoint]]\nendpoint_id = "a"\nmodel = "m"\nurl = "http://h/v1"\n')
    assert list(load_registry(path)) == ["a"]


def test_client_config_error_is_a_user_input_error():  # exit code 2 in the CLI; not an environment's mistake
    assert issubclass(ClientConfigError, UserInputError) and not issubclass(ClientConfigError, EnvConfigError)


def test_resolve_registry_name_with_overrides(tmp_path):
    path = write(tmp_path, REGISTRY)
    specs = resolve_model("qwen", registry_path=path, headers={"X-Run": "7"})
    assert [s.url for s in specs] == ["http://gpu-1:8000/v1", "http://gpu-2:8000/v1"]
    assert specs[0].headers == {"X-Team": "evals", "X-Run": "7"} and specs[1].headers == {"X-Run": "7"}
    overridden = resolve_model("qwen", registry_path=path, base_url="http://other:9000/v1", key_var="MY_KEY")
    assert {s.url for s in overridden} == {"http://other:9000/v1"}
    assert {s.key_var for s in overridden} == {"MY_KEY"}
    # the registry itself is not modified by the overrides
    assert load_registry(path)["qwen"][0].headers == {"X-Team": "evals"}


def test_default_registry_path_is_used_when_present(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ClientConfigError, match="unknown model 'gpt': there is no endpoint registry"):
        resolve_model("gpt")  # no registry, no -b: never a silent default server
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "endpoints.toml").write_text(REGISTRY)
    assert resolve_model("gpt")[0].model == "gpt-4.1-mini"


def test_explicit_registry_path_must_exist(tmp_path):
    with pytest.raises(ClientConfigError, match="endpoint registry .*missing.toml does not exist"):
        resolve_model("gpt", registry_path=tmp_path / "missing.toml")


def test_literal_model_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (spec,) = resolve_model("gpt-4.1-mini", base_url="https://api.openai.com/v1")
    assert (spec.model, spec.url, spec.key_var, spec.kind) == ("gpt-4.1-mini", "https://api.openai.com/v1", "OPENAI_API_KEY", "openai")
    (remote,) = resolve_model("m", base_url="https://openrouter.ai/api/v1", key_var="OPENROUTER_API_KEY")
    assert (remote.url, remote.key_var) == ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY")
    (remote_default_key,) = resolve_model("m", base_url="https://openrouter.ai/api/v1")
    assert remote_default_key.key_var == "OPENAI_API_KEY"
    for url in ("http://localhost:8000/v1", "http://127.0.0.1:8000/v1"):
        (local,) = resolve_model("m", base_url=url)
        assert local.key_var is None and api_key_for(local) == "EMPTY"
    (local_with_key,) = resolve_model("m", base_url="http://localhost:8000/v1", key_var="VLLM_KEY")
    assert local_with_key.key_var == "VLLM_KEY"


def test_litellm_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (spec,) = resolve_model("litellm/anthropic/claude-sonnet-4")
    assert (spec.kind, spec.model, spec.key_var) == ("litellm", "anthropic/claude-sonnet-4", None)
    with pytest.raises(ClientConfigError, match="litellm/<provider>/<model>"):
        resolve_model("litellm/claude")


def test_unknown_names_are_an_error_naming_the_registry_ids(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, REGISTRY)
    with pytest.raises(ClientConfigError) as info:
        resolve_model("qwne", registry_path=path)
    message = str(info.value)
    assert "endpoint ids in" in message and "qwen" in message and "did you mean 'qwen'" in message
    assert "-b URL" in message and "-m local" in message
    with pytest.raises(ClientConfigError, match="unknown model 'Qwen/Qwen3-8B'"):
        resolve_model("Qwen/Qwen3-8B")  # an owner/model id, not a LiteLLM provider


def test_provider_names_go_to_litellm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("anthropic/claude-sonnet-4", "gemini/gemini-2.5-pro", "openrouter/qwen/qwen3-8b"):
        (spec,) = resolve_model(name)
        assert (spec.kind, spec.model, spec.url, spec.key_var) == ("litellm", name, "", None)


def test_k_must_be_a_variable_name_not_a_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ClientConfigError) as info:
        resolve_model("m", key_var="sk-live-abcdef123456")
    assert "NAME of an environment variable" in str(info.value) and "abcdef123456" not in str(info.value)


def test_api_key_for_reads_the_named_variable(monkeypatch):
    spec = EndpointSpec("m", "m", "https://api.openai.com/v1", "MY_TEST_KEY")
    monkeypatch.setenv("MY_TEST_KEY", "secret-value")
    assert api_key_for(spec) == "secret-value"
    monkeypatch.delenv("MY_TEST_KEY")
    with pytest.raises(ClientConfigError) as info:
        api_key_for(spec)
    assert str(info.value) == ("environment variable MY_TEST_KEY is not set; export it or pass -k NAME of the "
                               "variable holding your key")
    monkeypatch.setenv("MY_TEST_KEY", "")
    with pytest.raises(ClientConfigError, match="MY_TEST_KEY is not set"):
        api_key_for(spec)


def test_package_import_is_light():
    code = ("import sys, prime_cli.clients as c\n"
            "c.resolve_model('m', base_url='http://localhost:1/v1')\n"
            "c.resolve_model('anthropic/claude-sonnet-4')\n"
            "try:\n    c.resolve_model('Qwen/Qwen3-8B')\nexcept c.ClientConfigError:\n    pass\n"
            "print(sorted(m for m in ('openai', 'litellm', 'httpx', 'httpx2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
