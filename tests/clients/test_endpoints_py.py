"""configs/endpoints.py (the verifiers form, `ENDPOINTS = {...}`) is read like endpoints.toml, never run."""

from __future__ import annotations

import pytest

from prime_cli.clients import ClientConfigError, load_registry
from tests.evals.cli_support import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

GUIDE_FORM = """
ENDPOINTS = {
    "Qwen/Qwen2.5-7B-Instruct": {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "url": "http://0.0.0.0:8007/v1",
        "key": "local",
    },
    "pair": [
        {"model": "m", "url": "http://a:1/v1"},
        {"model": "m", "url": "http://b:1/v1"},
    ],
}
"""


def test_the_guide_form_reads_as_registry_entries(tmp_path):
    path = tmp_path / "endpoints.py"
    path.write_text(GUIDE_FORM)
    registry = load_registry(path)
    (qwen,) = registry["Qwen/Qwen2.5-7B-Instruct"]
    assert qwen.model == "Qwen/Qwen2.5-7B-Instruct" and qwen.url == "http://0.0.0.0:8007/v1"
    assert qwen.key_var is None  # "local": a local server that needs no key
    assert [s.url for s in registry["pair"]] == ["http://a:1/v1", "http://b:1/v1"]


@pytest.mark.parametrize(("text", "fragment"), [
    ("import os\nENDPOINTS = {'x': {'model': os.environ['M'], 'url': 'http://a/v1'}}", "literal dict"),
    ("X = 1", "no ENDPOINTS"),
    ("ENDPOINTS = {", "invalid Python"),
    ("ENDPOINTS = {'x': {'model': 'm', 'url': 'http://a/v1', 'key': 'sk-not a name'}}", "NAME of an environment variable"),
])
def test_bad_files_fail_clearly_and_are_not_run(tmp_path, text, fragment):
    path = tmp_path / "endpoints.py"
    path.write_text(text + "\nopen('ran', 'w')\n")
    with pytest.raises(ClientConfigError) as info:
        load_registry(path)
    assert fragment in str(info.value)
    assert not (tmp_path / "ran").exists() and not __import__("pathlib").Path("ran").exists()


def test_eval_uses_configs_endpoints_py_when_there_is_no_toml(tmp_path):
    with ScriptedOpenAIServer() as server:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "endpoints.py").write_text(
            f'ENDPOINTS = {{"scripted": {{"model": "m", "url": "{server.url}", "key": "local"}}}}\n')
        result = run_prime(["eval", "run", "reverse-text", "-m", "scripted", "-n", "2", "-r", "1"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "reverse-text" in result.stdout
