"""`prime env init|install|list|info` through the real CLI."""

import subprocess
import sys
import uuid

import pytest

from tests.environments.conftest import data_root
from tests.evals.cli_support import only_run_dir, read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer


@pytest.mark.parametrize("name", ["../evil", "a/b", "a\\b", "x..y", "9lives", ""])
def test_init_rejects_names_that_are_paths_or_invalid(tmp_path, name):
    result = run_prime(["env", "init", name], tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error: environment name")
    assert "Traceback" not in result.stderr and not (tmp_path / "environments").exists()


def test_info_rejects_a_name_with_a_path_separator(tmp_path):
    result = run_prime(["env", "info", "../gsm8k"], tmp_path)
    assert result.returncode == 2 and "path separator" in result.stderr


def test_init_writes_a_package_and_refuses_to_overwrite(tmp_path):
    result = run_prime(["env", "init", "my-env"], tmp_path)
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "environments" / "my_env"
    pyproject = (folder / "pyproject.toml").read_text()
    assert 'name = "my-env"' in pyproject and "[tool.prime.eval]" in pyproject and 'py-modules = ["my_env"]' in pyproject
    assert "def load_environment" in (folder / "my_env.py").read_text() and (folder / "README.md").is_file()
    again = run_prime(["env", "init", "my-env"], tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr
    assert run_prime(["env", "init", "my-env", "--force"], tmp_path).returncode == 0


def test_install_needs_a_pyproject(tmp_path):
    (tmp_path / "environments" / "bare").mkdir(parents=True)
    (tmp_path / "environments" / "bare" / "bare.py").write_text("def load_environment(): ...\n")
    for target in ("bare", "environments/bare"):
        result = run_prime(["env", "install", target], tmp_path)
        assert result.returncode == 2 and "has no pyproject.toml" in result.stderr, result.stderr
    missing = run_prime(["env", "install", "ghost"], tmp_path)
    assert missing.returncode == 2 and "prime env init ghost" in missing.stderr


def test_list_shows_installed_and_local_environments_with_versions(tmp_path):
    run_prime(["env", "init", "local-only"], tmp_path)
    result = run_prime(["env", "list", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    import json

    entries = {e["name"]: e for e in json.loads(result.stdout)}
    assert entries["local-only"]["local_version"] == "0.1.0" and entries["local-only"]["installed_version"] is None
    assert entries["wordle"]["installed_version"] == "0.1.0"  # the examples are installed by make setup
    table = run_prime(["env", "list"], tmp_path)
    assert "local-only" in table.stdout and "gsm8k" in table.stdout


def test_info_shows_arguments_dataset_sizes_and_rewards(tmp_path):
    result = run_prime(["env", "info", "gsm8k", "-a", f'{{"data_dir": "{data_root() / "gsm8k"}"}}'], tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "data_dir: str | None = None" in out and "format_weight: float = 0.2" in out
    train = len((data_root() / "gsm8k" / "train.jsonl").read_text().splitlines())
    assert f"datasets: train {train}, eval" in out
    assert "correct_answer (weight 1)" in out and "boxed_format (weight 0.2)" in out
    tools = run_prime(["env", "info", "wiki-search", "-a", f'{{"corpus_path": "{data_root() / "hotpotqa" / "dev_distractor_sample.jsonl"}"}}'], tmp_path)
    assert "tools: search_pages, view_sections, read_section" in tools.stdout
    no_data = run_prime(["env", "info", "gsm8k"], tmp_path, {"PRIME_DATA_DIR": str(tmp_path)})
    assert no_data.returncode == 0 and "datasets: not loaded" in no_data.stdout and "data_dir" in no_data.stdout


def test_init_install_then_eval_from_anywhere(tmp_path):
    name = f"my-env-{uuid.uuid4().hex[:8]}"
    module = name.replace("-", "_")
    try:
        assert run_prime(["env", "init", name], tmp_path).returncode == 0
        installed = run_prime(["env", "install", name], tmp_path, timeout=300)
        assert installed.returncode == 0, installed.stderr
        elsewhere = tmp_path / "elsewhere"  # no ./environments here: only the installed package can serve it
        elsewhere.mkdir()
        answers = {"What is 2 + 3?": "5", "What is the capital of France?": "Paris", "How many legs does a spider have?": "8"}
        with ScriptedOpenAIServer(lambda r: f"<answer>{answers[r['messages'][-1]['content']]}</answer>") as server:
            result = run_prime(["eval", "run", name, "-m", "m", "-b", server.url, "-n", "3", "-r", "2", "-s"], elsewhere)
        assert result.returncode == 0, result.stderr
        rows = read_rows(only_run_dir(elsewhere))
        assert len(rows) == 6 and all(r["reward"] == pytest.approx(1.2) for r in rows)
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", name], capture_output=True)
    assert subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, cwd=tmp_path / "elsewhere").returncode != 0
