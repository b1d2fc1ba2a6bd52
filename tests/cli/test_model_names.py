"""`-m NAME` as a user types it: registry ids, `-b` literals, provider names and the bare names LiteLLM
lists (gpt-4.1-mini) through litellm, and one clear error for anything else (never a silent fallback to
api.openai.com)."""

from __future__ import annotations

from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

CHAT = "/v1/chat/completions"
SMALL = ["-n", "2", "-r", "1"]
# Keys a provider or the OpenAI SDK could pick up from the developer's shell; every test sets them.
NO_PROVIDER_KEYS = {"OPENAI_API_KEY": "sk-test-not-a-key", "ANTHROPIC_API_KEY": "", "OPENAI_BASE_URL": "",
                    "OPENAI_API_BASE": ""}


def one_error_line(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_unknown_name_without_registry_is_one_clear_error(tmp_path):
    result = run_prime(["eval", "run", "reverse-text", "-m", "my-finetune-7b", *SMALL, "-s", "--max-retries", "0"],
                       tmp_path, NO_PROVIDER_KEYS)
    line = one_error_line(result)
    assert "'my-finetune-7b'" in line and "no endpoint registry" in line and "configs/endpoints.toml" in line
    assert "-b URL" in line and "-m local" in line
    assert not list(tmp_path.rglob("metadata.json"))  # nothing was started


def test_unknown_name_lists_the_registry_endpoint_ids(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "endpoints.toml").write_text(
        '[[endpoint]]\nendpoint_id = "qwen-a"\nmodel = "q"\nurl = "http://127.0.0.1:9/v1"\n'
        '[[endpoint]]\nendpoint_id = "qwen-b"\nmodel = "q"\nurl = "http://127.0.0.1:9/v1"\n')
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "qwen-c", *SMALL], tmp_path,
                                    NO_PROVIDER_KEYS))
    assert "'qwen-c'" in line and "configs/endpoints.toml" in line and "qwen-a, qwen-b" in line and "-b URL" in line
    registry = tmp_path / "mine.toml"
    registry.write_text('[[endpoint]]\nendpoint_id = "only-one"\nmodel = "q"\nurl = "http://127.0.0.1:9/v1"\n')
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "qwen-a", "-e", str(registry), *SMALL],
                                    tmp_path, NO_PROVIDER_KEYS))
    assert "mine.toml" in line and "only-one" in line


def test_gepa_gives_the_same_error(tmp_path):
    line = one_error_line(run_prime(["gepa", "run", "reverse-text", "-m", "gpt-4.1-typo", "-B", "20", "-n", "3",
                                     "-N", "2"], tmp_path, NO_PROVIDER_KEYS))
    assert "'gpt-4.1-typo'" in line and "no endpoint registry" in line and "-b URL" in line
    assert not list(tmp_path.rglob("metadata.json"))


def test_provider_name_goes_through_litellm(tmp_path):
    """`openai/scripted-model` is litellm's name for model `scripted-model` of provider openai; litellm
    reads OPENAI_BASE_URL, pointed here at the loopback server. The OpenAI-compatible path would have
    sent the literal `openai/scripted-model` to api.openai.com instead."""
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "openai/scripted-model", *SMALL], tmp_path,
                           {**NO_PROVIDER_KEYS, "OPENAI_API_KEY": "sk-litellm-test", "OPENAI_BASE_URL": server.url})
        sent = server.requests_to(CHAT)
    assert result.returncode == 0, result.stderr
    assert "lcs_reward     1.000" in result.stdout
    assert len(sent) == 2 and {r["json"]["model"] for r in sent} == {"scripted-model"}
    assert {r["headers"]["authorization"] for r in sent} == {"Bearer sk-litellm-test"}


def test_provider_name_without_its_key_fails_before_any_request(tmp_path):
    result = run_prime(["eval", "run", "reverse-text", "-m", "anthropic/claude-sonnet-4", *SMALL, "-s"], tmp_path,
                       NO_PROVIDER_KEYS)
    line = one_error_line(result)
    assert "anthropic" in line and "ANTHROPIC_API_KEY" in line and "-k" in line
    assert not list(tmp_path.rglob("metadata.json"))


def test_with_b_a_provider_style_name_is_a_literal_model_id(tmp_path):
    """OpenRouter-style ids such as `anthropic/claude-3.5-sonnet` go as they are to the -b server."""
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "anthropic/claude-3.5-sonnet", "-b", server.url,
                            *SMALL], tmp_path, NO_PROVIDER_KEYS)
        models = {r["json"]["model"] for r in server.requests_to(CHAT)}
    assert result.returncode == 0, result.stderr
    assert models == {"anthropic/claude-3.5-sonnet"}


def test_litellm_prefix_with_b_keeps_working(tmp_path):
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "litellm/openai/scripted-model", "-b", server.url,
                            *SMALL], tmp_path, NO_PROVIDER_KEYS)
        models = {r["json"]["model"] for r in server.requests_to(CHAT)}
    assert result.returncode == 0, result.stderr
    assert models == {"scripted-model"}


def test_a_bare_name_litellm_lists_goes_to_its_provider_with_one_line_saying_so(tmp_path):
    """`-m gpt-4.1-mini` as the guides type it: LiteLLM's model list says OpenAI; litellm reads
    OPENAI_BASE_URL, pointed here at the loopback server, and the name goes as it is."""
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "gpt-4.1-mini", *SMALL, "-s"], tmp_path,
                           {**NO_PROVIDER_KEYS, "OPENAI_API_KEY": "sk-bare-name-test", "OPENAI_BASE_URL": server.url})
        sent = server.requests_to(CHAT)
    assert result.returncode == 0, result.stderr
    assert "gpt-4.1-mini: OpenAI via LiteLLM, key OPENAI_API_KEY" in result.stderr.splitlines()
    assert len(sent) == 2 and {r["json"]["model"] for r in sent} == {"gpt-4.1-mini"}
    assert {r["headers"]["authorization"] for r in sent} == {"Bearer sk-bare-name-test"}
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"sk-bare-name-test" in p.read_bytes()]


def test_a_bare_name_without_its_key_is_one_line_naming_the_variable(tmp_path):
    result = run_prime(["eval", "run", "reverse-text", "-m", "gpt-4.1-mini", *SMALL, "-s"], tmp_path,
                       {**NO_PROVIDER_KEYS, "OPENAI_API_KEY": ""})
    line = one_error_line(result)
    assert "gpt-4.1-mini" in line and "OPENAI_API_KEY" in line and "not set" in line
    assert not list(tmp_path.rglob("metadata.json"))
    gepa = run_prime(["gepa", "run", "reverse-text", "-m", "local", "-M", "claude-sonnet-4-20250514", "-B", "20",
                      "-n", "3", "-N", "2"], tmp_path, NO_PROVIDER_KEYS)
    line = one_error_line(gepa)
    assert "reflection model -M" in line and "ANTHROPIC_API_KEY" in line


def test_the_registry_keeps_precedence_over_a_bare_name(tmp_path):
    with ScriptedOpenAIServer() as server:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "endpoints.toml").write_text(
            f'[[endpoint]]\nendpoint_id = "gpt-4.1-mini"\nmodel = "served-under-my-name"\nurl = "{server.url}"\n')
        result = run_prime(["eval", "run", "reverse-text", "-m", "gpt-4.1-mini", *SMALL], tmp_path,
                           {**NO_PROVIDER_KEYS, "OPENAI_API_KEY": ""})
        models = {r["json"]["model"] for r in server.requests_to(CHAT)}
    assert result.returncode == 0, result.stderr
    assert models == {"served-under-my-name"} and "via LiteLLM" not in result.stderr


def test_names_litellm_lists_but_cannot_chat_with_stay_unknown(tmp_path):
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "text-embedding-3-small", *SMALL],
                                    tmp_path, NO_PROVIDER_KEYS))
    assert "unknown model 'text-embedding-3-small'" in line


def test_a_bare_name_the_table_gives_to_a_provider_without_a_key_stays_unknown(tmp_path):
    """LiteLLM's table gives bare gemini-* names to Vertex AI (Google credentials; no key to check before the
    run, a traceback storm at the first request); a user with GEMINI_API_KEY means gemini/gemini-2.0-flash."""
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "gemini-2.0-flash", *SMALL], tmp_path,
                                    NO_PROVIDER_KEYS))
    assert "unknown model 'gemini-2.0-flash'" in line
