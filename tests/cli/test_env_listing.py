"""`prime env list` lists environments only; a local ./environments/<env>/ wins over a different installed copy."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import prime_env, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

ENV_SOURCE = textwrap.dedent('''
    import prime_cli.envs as vf

    def load_environment(copies: int = 1, system_prompt: str = "Answer."):
        def half(completion) -> float:
            return 0.5
        rows = [{{"question": "{question}", "answer": "x"}}] * copies
        return vf.SingleTurnEnv(dataset=rows, eval_dataset=rows, system_prompt=system_prompt,
                                rubric=vf.Rubric(funcs=[half]))
''')


def fake_dist(site: Path, name: str, version: str, module: str, source: str, entry_points: str = "") -> None:
    """An installed distribution as pip leaves it: NAME-VERSION.dist-info plus its module, in `site`."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: prime-cli\n")
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)
    (site / f"{module}.py").write_text(source)


@pytest.fixture
def site(tmp_path) -> Path:
    """A folder for PYTHONPATH with an installed reverse-text 9.9.9 (not the repo's), an environment and a plugin."""
    site = tmp_path / "site"
    fake_dist(site, "reverse-text", "9.9.9", "reverse_text", ENV_SOURCE.format(question="INSTALLED copy"))
    fake_dist(site, "fake-env", "0.2.0", "fake_env", ENV_SOURCE.format(question="fake"))
    fake_dist(site, "fake-trainer", "0.1.0", "fake_trainer", "plugin = object()\n",
              entry_points="[prime.trainers]\nfake = fake_trainer:plugin\n")
    fake_dist(site, "prime-helpers", "1.0.0", "prime_helpers", "def helper():\n    return 1\n")
    return site


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A workspace whose ./environments/reverse_text/ is a local copy (0.3.0) different from the installed one."""
    folder = tmp_path / "ws" / "environments" / "reverse_text"
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "reverse-text"\nversion = "0.3.0"\n')
    (folder / "reverse_text.py").write_text(ENV_SOURCE.format(question="LOCAL copy"))
    return tmp_path / "ws"


def listed(cwd: Path, site: Path) -> dict[str, dict]:
    result = run_prime(["env", "list", "--json"], cwd, extra_env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    return {entry["name"]: entry for entry in json.loads(result.stdout)}


def test_env_list_shows_environments_and_not_plugins_or_other_packages(tmp_path, site):
    entries = listed(tmp_path, site)
    assert "fake-env" in entries and "reverse-text" in entries and "gsm8k" in entries
    assert "prime-lora" not in entries  # the trainer plugin depends on prime-cli but is no environment
    assert "fake-trainer" not in entries
    assert "prime-helpers" not in entries  # depends on prime-cli, has no load_environment
    # the copy that `import reverse_text` finds (PYTHONPATH first), with its version
    assert entries["reverse-text"]["installed_version"] == "9.9.9"
    assert entries["reverse-text"]["location"] == str(site)
    table = run_prime(["env", "list"], tmp_path, extra_env={"PYTHONPATH": str(site)})
    assert "prime-lora" not in table.stdout and "fake-trainer" not in table.stdout and "fake-env" in table.stdout


def test_env_list_says_the_local_folder_is_used_over_a_different_installed_copy(workspace, site):
    entries = listed(workspace, site)
    entry = entries["reverse-text"]
    assert (entry["installed_version"], entry["local_version"], entry["used"]) == ("9.9.9", "0.3.0", "local")
    assert (workspace / entry["location"]).resolve() == (workspace / "environments" / "reverse_text").resolve()
    assert entry["installed_location"] == str(site)
    assert entries["gsm8k"]["used"] == "installed"
    table = run_prime(["env", "list"], workspace, extra_env={"PYTHONPATH": str(site)})
    assert (f"reverse-text: ./environments/reverse_text/ is used here, not the installed copy in {site} "
            "(`prime env install reverse-text` installs the local one)") in table.stdout


def eval_prompt(cwd: Path, site: Path) -> tuple[str, str]:
    """(the prompt `prime eval run reverse-text -v` showed, its stderr)."""
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "1", "-r", "1", "-v"],
                           cwd, extra_env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    prompts = [line for line in result.stdout.splitlines() if line.startswith("  prompt: ")]
    assert len(prompts) == 1, result.stdout
    return prompts[0].removeprefix("  prompt: "), result.stderr


WARNING = ("warning: reverse-text: using ./environments/reverse_text/ (local, 0.3.0), not the installed "
           "reverse-text 9.9.9 in {site}; `prime env install reverse-text` installs the local one")


def test_eval_run_uses_the_local_folder_and_says_so_in_one_line(workspace, site):
    prompt, stderr = eval_prompt(workspace, site)
    assert prompt == "LOCAL copy"
    assert stderr.splitlines() == [WARNING.format(site=site)]


def test_eval_run_without_a_local_folder_uses_the_installed_copy_silently(tmp_path, site):
    prompt, stderr = eval_prompt(tmp_path, site)
    assert prompt == "INSTALLED copy"
    assert stderr == ""


def test_eval_run_with_the_local_folder_installed_is_silent(tmp_path):
    # the repo's own ./environments/reverse_text/ is what the venv has installed (editable): no warning
    from tests.support.cli import REPO

    workspace = tmp_path / "ws"
    (workspace / "environments").mkdir(parents=True)
    (workspace / "environments" / "reverse_text").symlink_to(REPO / "environments" / "reverse_text")
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "reverse-text", "-m", "m", "-b", server.url, "-n", "1", "-r", "1"],
                           workspace)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_env_info_describes_the_local_folder(workspace, site):
    result = run_prime(["env", "info", "reverse-text"], workspace, extra_env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"reverse-text  ({workspace / 'environments' / 'reverse_text' / 'reverse_text.py'})"
    assert result.stderr.splitlines() == [WARNING.format(site=site)]


def test_vf_load_environment_uses_the_local_folder(workspace, site):
    script = "import prime_cli.envs as vf; print(vf.load_environment('reverse-text').dataset[0]['question'])"
    python = str(Path(prime_env()["PATH"].split(":")[0]) / "python")
    result = subprocess.run([python, "-W", "error::UserWarning", "-c", script], cwd=workspace, capture_output=True,
                            text=True, env=prime_env({"PYTHONPATH": str(site)}), timeout=60)
    assert result.returncode != 0 and "LocalEnvironmentWarning" in result.stderr  # a real, filterable warning
    result = subprocess.run([python, "-c", script], cwd=workspace, capture_output=True, text=True,
                            env=prime_env({"PYTHONPATH": str(site)}), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "LOCAL copy"
    assert "using ./environments/reverse_text/ (local, 0.3.0)" in result.stderr


def test_gepa_run_uses_the_local_folder(workspace, site):
    with ScriptedOpenAIServer(reply=lambda request: "```\nA new prompt.\n```") as server:
        result = run_prime(["gepa", "run", "reverse-text", "-m", "m", "-b", server.url, "-B", "4", "-n", "2", "-N", "1",
                            "--minibatch-size", "1"], workspace, extra_env={"PYTHONPATH": str(site)})
        questions = {request["json"]["messages"][-1]["content"] for request in server.requests_to("/v1/chat/completions")
                     if len(request["json"]["messages"]) == 2}  # student calls: system prompt + question
    assert result.returncode == 0, result.stderr
    assert questions == {"LOCAL copy"}
    assert result.stderr.splitlines() == [WARNING.format(site=site)]
