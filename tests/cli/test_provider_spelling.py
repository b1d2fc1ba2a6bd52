"""The guides' model spellings that LiteLLM spells otherwise get a hint naming LiteLLM's spelling (issue 54,
item 6): `-m google/gemini-3-flash-preview` (the guides', OpenRouter's) is `gemini/gemini-3-flash-preview`."""

from __future__ import annotations

from tests.cli.conftest import one_error_line
from tests.support.cli import run_prime

NO_PROVIDER_KEYS = {"OPENAI_API_KEY": "", "GEMINI_API_KEY": "", "OPENAI_BASE_URL": "", "OPENAI_API_BASE": ""}


def test_google_prefix_is_told_litellms_gemini_spelling(tmp_path):
    result = run_prime(["eval", "run", "reverse-text", "-m", "google/gemini-3-flash-preview", "-n", "1", "-r", "1"],
                       tmp_path, NO_PROVIDER_KEYS)
    line = one_error_line(result, "unknown model 'google/gemini-3-flash-preview'")
    assert "LiteLLM spells it gemini/gemini-3-flash-preview" in line and "GEMINI_API_KEY" in line, line
    assert "openrouter/google/gemini-3-flash-preview" in line, line
    assert "-b URL" in line  # the generic advice stays
    assert not list(tmp_path.rglob("metadata.json"))


def test_a_bare_gemini_name_is_told_the_gemini_api_spelling(tmp_path):
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "gemini-3-flash-preview", "-n", "1"],
                                    tmp_path, NO_PROVIDER_KEYS))
    assert "LiteLLM spells it gemini/gemini-3-flash-preview" in line, line


def test_a_name_litellm_does_not_know_gets_no_spelling_hint(tmp_path):
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "acme/made-up-model-7b", "-n", "1"],
                                    tmp_path, NO_PROVIDER_KEYS))
    assert "unknown model 'acme/made-up-model-7b'" in line and "spells it" not in line, line


def test_the_spelling_it_names_is_accepted(tmp_path):
    """gemini/... resolves (through LiteLLM): without the key, the refusal is about the key, not the name."""
    line = one_error_line(run_prime(["eval", "run", "reverse-text", "-m", "gemini/gemini-3-flash-preview", "-n", "1"],
                                    tmp_path, NO_PROVIDER_KEYS))
    assert "GEMINI_API_KEY" in line and "unknown model" not in line, line
