"""`prime env install [OWNER/]NAME[==VERSION]` from real package indexes (pypiserver, with and without
authentication), through the installed `prime` of a throwaway venv (the installs never reach the dev .venv)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.evals.cli_support import only_run_dir, read_rows
from tests.support.cli import prime_env, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer
from tests.support.throwaway_venv import prime_venv, site_packages

NAME = "share-demo"  # an environment no other test publishes
MODULE = "share_demo"
EVIL_MARKER = "PLANTED_BY_A_SAME_NAMED_PROJECT = True"
ANSWERS = {"What is 2 + 3?": "5", "What is the capital of France?": "Paris", "How many legs does a spider have?": "8"}


def build(root: Path, version: str, marker: str = "") -> list[Path]:
    """The sdist and wheel of NAME at `version` (the `prime env init` template, `marker` added to its code)."""
    assert run_prime(["env", "init", NAME], root).returncode == 0
    folder = root / "environments" / MODULE
    pyproject = folder / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', f'version = "{version}"'))
    if marker:
        (folder / f"{MODULE}.py").write_text((folder / f"{MODULE}.py").read_text() + f"\n{marker}\n")
    out = root / "dist"
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(folder)],
                   check=True, capture_output=True)
    return sorted(out.iterdir())


@pytest.fixture(scope="module")
def published(tmp_path_factory, open_index, private_index) -> dict[str, list[Path]]:
    """NAME 0.1.0 on both indexes and 0.2.0 on the open one; an impostor 0.1.0 and 9.0 built, not published."""
    dists = {version: build(tmp_path_factory.mktemp(f"build-{version}"), version) for version in ("0.1.0", "0.2.0")}
    private_index.add(*dists["0.1.0"])
    open_index.add(*dists["0.1.0"], *dists["0.2.0"])
    impostor = tmp_path_factory.mktemp("impostor")
    for version in ("0.1.0", "9.0"):
        for file in build(tmp_path_factory.mktemp(f"impostor-{version}"), version, EVIL_MARKER):
            # a build tag (-1-) makes pip prefer this wheel to ours of the same version, were it to see both
            file.rename(impostor / file.name.replace(f"-{version}-py3", f"-{version}-1-py3"))
    return {"impostor": sorted(impostor.iterdir())}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    return prime_venv(tmp_path_factory.mktemp("venv") / "venv")


def in_venv(bin_dir: Path, args: list[str], cwd: Path, extra_env: dict[str, str] | None = None):
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "uninstall", "-y", "-q", NAME], capture_output=True)
    return prime_in(bin_dir, args, cwd, extra_env)


def prime_in(bin_dir: Path, args: list[str], cwd: Path, extra_env: dict[str, str] | None = None):
    return subprocess.run([str(bin_dir / "prime"), *args], cwd=cwd, env=prime_env(extra_env), capture_output=True,
                          text=True, timeout=300)


def endpoints(root: Path, *tables: str) -> Path:
    (root / "configs").mkdir(exist_ok=True)
    path = root / "configs" / "endpoints.toml"
    path.write_text("\n".join(tables))
    return path


def installed_code(bin_dir: Path) -> str:
    return (site_packages(bin_dir) / f"{MODULE}.py").read_text()


def test_owner_form_installs_from_the_private_index_and_evals(tmp_path, venv, private_index, published):
    endpoints(tmp_path, private_index.endpoints_table("team", token_var="TEAM_TOKEN", user=private_index.user))
    token = {"TEAM_TOKEN": private_index.token}
    result = in_venv(venv, ["env", "install", f"team/{NAME}"], tmp_path, token)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"installed {NAME} 0.1.0 from index team ({private_index.simple_url})"
    assert private_index.token not in result.stdout + result.stderr
    assert "def load_environment" in installed_code(venv) and EVIL_MARKER not in installed_code(venv)
    elsewhere = tmp_path / "elsewhere"  # no ./environments/: only the installed package can serve it
    elsewhere.mkdir()
    with ScriptedOpenAIServer(lambda r: f"<answer>{ANSWERS[r['messages'][-1]['content']]}</answer>") as server:
        evaluated = prime_in(venv, ["eval", "run", f"team/{NAME}", "-m", "m", "-b", server.url, "-n", "3", "-r", "1", "-s"],
                             elsewhere)
    assert evaluated.returncode == 0, evaluated.stderr
    run_dir = only_run_dir(elsewhere)
    assert json.loads((run_dir / "metadata.json").read_text())["env_id"] == f"team/{NAME}"
    assert [row["reward"] for row in read_rows(run_dir)] == pytest.approx([1.2] * 3)
    info = prime_in(venv, ["env", "info", f"team/{NAME}"], elsewhere)
    assert info.returncode == 0 and info.stdout.startswith(f"team/{NAME}  ({site_packages(venv)}"), info.stderr
    checked = prime_in(venv, ["env", "check", f"team/{NAME}"], elsewhere)
    assert checked.returncode == 0 and "ok: the reference gets the top reward" in checked.stdout, checked.stderr
    config = elsewhere / "rl.toml"
    config.write_text(f'[orchestrator]\nbatch_size = 8\nrollouts_per_example = 2\n\n[[orchestrator.env]]\nid = "team/{NAME}"\n')
    planned = prime_in(venv, ["train", str(config), "--dry-run"], elsewhere)
    assert planned.returncode == 0 and 'id = "team/share-demo"' in planned.stdout, planned.stderr


def test_a_bare_name_comes_from_the_only_index_newest_unless_a_version_is_given(tmp_path, venv, open_index,
                                                                                published):
    endpoints(tmp_path, open_index.endpoints_table("lab"))
    newest = in_venv(venv, ["env", "install", NAME], tmp_path, {"HOME": str(tmp_path)})  # no ~/.pypirc index
    assert newest.stdout.strip() == f"installed {NAME} 0.2.0 from index lab ({open_index.simple_url})", newest.stderr
    pinned = prime_in(venv, ["env", "install", f"lab/{NAME}==0.1.0"], tmp_path)
    assert pinned.returncode == 0 and f"installed {NAME} 0.1.0 from index lab" in pinned.stdout, pinned.stderr
    assert [p.name for p in site_packages(venv).glob("share_demo-*.dist-info")] == ["share_demo-0.1.0.dist-info"]
    missing = prime_in(venv, ["env", "install", f"lab/{NAME}==0.3"], tmp_path)
    assert missing.returncode == 2 and missing.stderr.strip() == (
        f"error: {NAME} 0.3 is not on index lab ({open_index.simple_url}); it has 0.1.0, 0.2.0")


def test_a_same_named_project_on_the_users_own_sources_never_wins(tmp_path, venv, private_index, published):
    """pip's usual sources (here find-links and an extra index holding an impostor of the same version, and a
    newer one) are not read for the environment itself."""
    endpoints(tmp_path, private_index.endpoints_table("team", token_var="TEAM_TOKEN", user=private_index.user))
    impostors = published["impostor"][0].parent
    result = in_venv(venv, ["env", "install", f"team/{NAME}"], tmp_path,
                     {"TEAM_TOKEN": private_index.token, "PIP_FIND_LINKS": str(impostors),
                      "PIP_EXTRA_INDEX_URL": impostors.as_uri()})
    assert result.returncode == 0, result.stderr
    assert "0.1.0" in result.stdout and EVIL_MARKER not in installed_code(venv)


def one_error_line(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and not result.stdout.strip(), result.stderr
    return lines[0]


def test_refusals_are_one_line(tmp_path, open_index, private_index, published):
    """These fail before pip runs, so the dev `prime` is used."""
    endpoints(tmp_path, open_index.endpoints_table("lab"),
              private_index.endpoints_table("team", token_var="TEAM_TOKEN", user=private_index.user))
    token = {"TEAM_TOKEN": private_index.token, "HOME": str(tmp_path)}  # no ~/.pypirc index
    unknown = one_error_line(run_prime(["env", "install", f"nobody/{NAME}"], tmp_path, token))
    assert "no package index named 'nobody' (configured: lab, team)" in unknown
    absent = one_error_line(run_prime(["env", "install", "lab/not-there"], tmp_path, token))
    assert absent == (f"error: not-there is not on index lab ({open_index.simple_url}); "
                      "push it with `prime env push`")
    several = one_error_line(run_prime(["env", "install", NAME], tmp_path, token))
    assert "several package indexes are configured (lab, team)" in several and f"OWNER/{NAME}" in several
    wrong = run_prime(["env", "install", f"team/{NAME}"], tmp_path, {**token, "TEAM_TOKEN": "not-the-token-x1"})
    assert "refused the credentials" in one_error_line(wrong) and "$TEAM_TOKEN" in wrong.stderr
    assert "not-the-token-x1" not in wrong.stdout + wrong.stderr
    unset = one_error_line(run_prime(["env", "install", f"team/{NAME}"], tmp_path, {**token, "TEAM_TOKEN": ""}))
    assert "$TEAM_TOKEN, which is not set" in unset
    private_index.stop()
    try:
        down = run_prime(["env", "install", f"team/{NAME}"], tmp_path, token)
    finally:
        private_index.start()
    assert "cannot reach index team" in one_error_line(down) and private_index.token not in down.stderr


def test_no_index_configured_keeps_the_local_hint(tmp_path):
    line = one_error_line(run_prime(["env", "install", "ghost"], tmp_path, {"HOME": str(tmp_path)}))
    assert "prime env init ghost" in line and "[[index]]" in line


def test_the_index_copy_replaces_the_same_version_installed_from_elsewhere(tmp_path, venv, private_index, published):
    """An editable local share-demo 0.1.0 is installed: pip must not call the index's 0.1.0 "already satisfied"."""
    local = tmp_path / "local"
    local.mkdir()
    assert run_prime(["env", "init", NAME], local).returncode == 0
    code = local / "environments" / MODULE / f"{MODULE}.py"
    code.write_text(code.read_text() + f"\n{EVIL_MARKER}\n")
    assert in_venv(venv, ["env", "install", NAME], local).returncode == 0  # editable, version 0.1.0
    endpoints(tmp_path, private_index.endpoints_table("team", token_var="TEAM_TOKEN", user=private_index.user))
    result = prime_in(venv, ["env", "install", f"team/{NAME}"], tmp_path, {"TEAM_TOKEN": private_index.token})
    assert result.stdout.strip() == f"installed {NAME} 0.1.0 from index team ({private_index.simple_url})", result.stderr
    assert EVIL_MARKER not in installed_code(venv) and "def load_environment" in installed_code(venv)


def test_a_stray_folder_named_like_the_environment_does_not_hide_the_index(tmp_path, venv, open_index, published):
    (tmp_path / NAME).mkdir()  # no pyproject.toml: not an environment's folder
    endpoints(tmp_path, open_index.endpoints_table("lab"))
    result = in_venv(venv, ["env", "install", NAME], tmp_path, {"HOME": str(tmp_path)})
    assert result.stdout.strip() == f"installed {NAME} 0.2.0 from index lab ({open_index.simple_url})", result.stderr
