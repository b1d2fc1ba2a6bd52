"""`prime env push` against real package indexes (pypiserver on loopback, with and without authentication),
through the installed `prime`; the pushed package installed into a fresh virtualenv and evaluated there."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import zipfile
from pathlib import Path

import pytest

from prime_cli.workspace.index_client import published_versions
from prime_cli.workspace.indexes import PackageIndex
from tests.support.cli import prime_env, run_prime
from tests.support.package_index import PackageIndexServer
from tests.support.scripted_server import ScriptedOpenAIServer
from tests.support.throwaway_venv import prime_venv

TOKEN_VAR = "TEAM_INDEX_TOKEN"

BROKEN_REWARD = '''import prime_cli.envs as vf


def load_environment() -> vf.Environment:
    def always_right(completion, answer) -> float:
        return 1.0

    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[always_right]))
'''


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def versions_on(server, name: str = "my-env", creds: tuple[str, str] | None = None) -> list[str]:
    index = PackageIndex("t", server.simple_url, server.url, "test", user=creds[0] if creds else None,
                         password=creds[1] if creds else None)
    return published_versions(index, name)


@pytest.fixture
def workspace(tmp_path: Path, open_index, private_index) -> Path:
    """A workspace with one new environment and both indexes configured, HOME pointing inside it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "home").mkdir()
    assert run_prime(["env", "init", "my-env"], ws).returncode == 0
    (ws / "configs").mkdir()
    (ws / "configs" / "endpoints.toml").write_text(
        private_index.endpoints_table("team", token_var=TOKEN_VAR, user="alice", visibility="private") + "\n"
        + open_index.endpoints_table("pub", visibility="public"))
    return ws


def push(ws: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {"HOME": str(ws / "home")}
    if token is not None:
        env[TOKEN_VAR] = token
    return run_prime(["env", "push", *args], ws, env)


def bump(ws: Path, version: str) -> None:
    pyproject = ws / "environments" / "my_env" / "pyproject.toml"
    pyproject.write_text(re.sub(r'^version = ".*"$', f'version = "{version}"', pyproject.read_text(), count=1, flags=re.M))


def all_text_under(*folders: Path) -> bytes:
    return b"".join(p.read_bytes() for folder in folders for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_push_then_install_in_a_fresh_venv_then_eval(workspace, private_index, tmp_path):
    token = private_index.token
    pushed = push(workspace, "-p", "environments/my_env", "--visibility", "private", token=token)
    assert pushed.returncode == 0, pushed.stderr
    assert "pushed my-env 0.1.0 to team" in pushed.stdout and "prime env check passed on 3 rows" in pushed.stdout
    assert "prime env install team/my-env" in pushed.stdout
    assert versions_on(private_index, creds=("alice", token)) == ["0.1.0"]

    venv = prime_venv(tmp_path / "fresh").parent  # a new virtualenv with prime installed and no environment
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "configs").mkdir(parents=True)
    (elsewhere / "configs" / "endpoints.toml").write_text(
        private_index.endpoints_table("team", token_var=TOKEN_VAR, user="alice"))
    env = prime_env({"HOME": str(workspace / "home"), TOKEN_VAR: token, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"})

    def fresh_prime(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "prime"), *args], cwd=elsewhere, env=env, capture_output=True,
                              text=True, timeout=300)

    installed = fresh_prime("env", "install", "team/my-env")
    assert installed.returncode == 0, installed.stderr
    located = subprocess.run([str(venv / "bin" / "python"), "-c", "import my_env; print(my_env.__file__)"],
                             cwd=elsewhere, capture_output=True, text=True)
    assert located.stdout.strip().startswith(str(venv)), located  # installed into the fresh venv, not a folder

    info = fresh_prime("env", "info", "team/my-env")
    assert info.returncode == 0, info.stderr
    assert "provenance: my-env 0.1.0: pushed " in info.stdout and "to team with prime 0.1.0" in info.stdout
    assert "prime env check passed on 3 rows" in info.stdout

    with ScriptedOpenAIServer() as server:
        evaluated = fresh_prime("eval", "run", "team/my-env", "-m", "student", "-b", server.url, "-n", "3", "-r", "1", "-s")
    assert evaluated.returncode == 0, evaluated.stderr
    runs = list((elsewhere / "outputs" / "evals").glob("*/*/results.jsonl"))
    assert len(runs) == 1 and len(runs[0].read_text().splitlines()) == 3
    assert json.loads((runs[0].parent / "metadata.json").read_text())["env_id"] in ("team/my-env", "my-env")

    outputs = "".join(r.stdout + r.stderr for r in (pushed, installed, info, evaluated))
    assert token not in outputs
    assert token.encode() not in all_text_under(workspace, elsewhere, venv / "lib")


def test_push_without_authentication_from_a_pypirc_section(workspace, open_index):
    (workspace / "configs" / "endpoints.toml").unlink()
    (workspace / "home" / ".pypirc").write_text(f"[distutils]\nindex-servers = shared\n\n[shared]\nrepository = {open_index.url}\n")
    bump(workspace, "0.3.0")
    pushed = push(workspace, "-p", "environments/my_env", "-r", "shared")
    assert pushed.returncode == 0, pushed.stderr
    assert "pushed my-env 0.3.0 to shared" in pushed.stdout
    assert "0.3.0" in versions_on(open_index)


def test_a_failing_environment_check_refuses_the_push(workspace, open_index):
    (workspace / "environments" / "my_env" / "my_env.py").write_text(BROKEN_REWARD)
    bump(workspace, "0.4.0")
    refused = push(workspace, "-p", "environments/my_env", "--visibility", "public")
    assert refused.returncode == 1, refused.stderr
    assert "push refused: `prime env check my-env` found" in refused.stderr and "--skip-check" in refused.stderr
    assert "always_right" in refused.stderr  # the check's own problem lines
    assert "0.4.0" not in versions_on(open_index)
    assert not (workspace / "environments" / "my_env" / "dist").exists()  # refused before the build

    skipped = push(workspace, "-p", "environments/my_env", "--visibility", "public", "--skip-check")
    assert skipped.returncode == 0, skipped.stderr
    assert "warning: --skip-check" in skipped.stderr and "0.4.0" in versions_on(open_index)
    wheel = workspace / "environments" / "my_env" / "dist" / "my_env-0.4.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        recorded = json.loads(archive.read("my_env-0.4.0.dist-info/prime_provenance.json"))
    assert recorded["check"] == {"verdict": "skipped"} and recorded["prime_version"]


def test_a_repeated_version_is_one_line_with_the_next_version(workspace, open_index):
    bump(workspace, "0.5.0")
    assert push(workspace, "--visibility", "public", "-p", "environments/my_env").returncode == 0
    again = push(workspace, "--visibility", "public", "-p", "environments/my_env")
    line = one_error_line(again)
    assert "my-env 0.5.0 is already on index pub" in line and 'set version = "0.5.1"' in line
    assert again.stdout == ""


def test_a_wrong_token_is_one_line_and_never_shown(workspace, private_index):
    wrong = "wrong-" + private_index.token[::-1]
    refused = push(workspace, "--visibility", "private", "-p", "environments/my_env", token=wrong)
    line = one_error_line(refused)
    assert "index team" in line and "refused the credentials" in line and f"${TOKEN_VAR}" in line
    assert wrong not in refused.stderr + refused.stdout
    missing = push(workspace, "--visibility", "private", "-p", "environments/my_env")
    assert f"{TOKEN_VAR}, which is not set" in one_error_line(missing)


def test_a_token_refused_only_at_upload_is_one_line_and_keeps_the_built_files(workspace, tmp_path):
    """An index that lets anyone read and only checks the token on upload: the refusal comes from twine."""
    users = {"alice": "right-" + secrets.token_urlsafe(12)}
    with PackageIndexServer(tmp_path / "upload-only" / "packages", users, protects="update") as index:
        (workspace / "configs" / "endpoints.toml").write_text(index.endpoints_table("team", token_var=TOKEN_VAR, user="alice"))
        bump(workspace, "0.7.0")
        wrong = "wrong-" + secrets.token_urlsafe(12)
        refused = push(workspace, "-p", "environments/my_env", token=wrong)
        assert versions_on(index) == []
    line = one_error_line(refused)
    assert "index team" in line and "refused the credentials (HTTP 403)" in line and wrong not in refused.stderr
    assert "the built files are kept in" in line
    assert (workspace / "environments" / "my_env" / "dist" / "my_env-0.7.0-py3-none-any.whl").is_file()


def test_a_stopped_index_is_one_line(workspace, open_index):
    open_index.stop()
    try:
        down = push(workspace, "--visibility", "public", "-p", "environments/my_env")
    finally:
        open_index.start()
    line = one_error_line(down)
    assert "cannot reach index pub" in line and "is it running" in line


def test_dry_run_builds_and_uploads_nothing(workspace, open_index):
    bump(workspace, "0.6.0")
    dry = push(workspace, "--visibility", "public", "-p", "environments/my_env", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: prime env check passed on 3 rows" in dry.stdout and "would upload my-env 0.6.0 to pub" in dry.stdout
    assert "0.6.0" not in versions_on(open_index)
    built = sorted(p.name for p in (workspace / "environments" / "my_env" / "dist").iterdir())
    assert built == ["my_env-0.6.0-py3-none-any.whl", "my_env-0.6.0.tar.gz"]
    assert not (workspace / "environments" / "my_env" / "build").exists()  # the wheel is built from the sdist


def test_bad_flags_are_one_line(workspace):
    several = push(workspace, "-p", "environments/my_env")
    assert "several package indexes are configured (team (private), pub (public))" in one_error_line(several)
    assert "--visibility must be public or private" in one_error_line(push(workspace, "--visibility", "secret"))
    assert "no package index named 'nope'" in one_error_line(push(workspace, "-r", "nope", "-p", "environments/my_env"))
    not_a_folder = push(workspace, "--visibility", "public", "-p", "environments/nothing")
    assert "no ./environments/nothing/" in one_error_line(not_a_folder) or "not a folder" in not_a_folder.stderr


PACKAGE_ENV = '''import atexit

import prime_cli.envs as vf

__version__ = "{version}"
atexit.register(lambda: print("{{bye}}"))  # printed after the check's JSON report


def load_environment() -> vf.Environment:
    def exact(completion, answer) -> float:
        return 1.0 if (completion[-1]["content"] or "").strip() == answer else 0.0

    rows = [{{"question": f"Say {{i}}", "answer": str(i)}} for i in range(3)]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[exact]))
'''


def src_layout_env(root: Path, version: str) -> Path:
    """A src/ layout package whose version is dynamic (read from the module by setuptools)."""
    folder = root / "pkg-env"
    (folder / "src" / "pkg_env").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "pkg_env" / "__init__.py").write_text(PACKAGE_ENV.format(version=version))
    (folder / "pyproject.toml").write_text('''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "pkg-env"
dynamic = ["version"]
dependencies = ["prime-cli"]

[tool.setuptools.dynamic]
version = { attr = "pkg_env.__version__" }

[tool.setuptools.packages.find]
where = ["src"]
''')
    return folder


def test_a_src_layout_with_a_dynamic_version_is_refused_before_the_check_when_published(workspace, open_index):
    folder = src_layout_env(workspace, "2.0.0")
    first = push(workspace, "-p", "pkg-env", "-r", "pub", "-n", "-1")
    assert first.returncode == 0, first.stderr
    assert "pushed pkg-env 2.0.0 to pub" in first.stdout and "passed on 3 rows" in first.stdout  # -n -1: all rows
    published = {p.name: p.read_bytes() for p in (folder / "dist").iterdir()}
    again = push(workspace, "-p", "pkg-env", "-r", "pub")
    line = one_error_line(again)
    assert "pkg-env 2.0.0 is already on index pub" in line and "where the version is set (it is dynamic)" in line
    assert {p.name: p.read_bytes() for p in (folder / "dist").iterdir()} == published  # nothing rebuilt
    src_layout_env(workspace, "2.0")  # the same version by PEP 440
    assert "pkg-env 2.0 is already on index pub" in one_error_line(push(workspace, "-p", "pkg-env", "-r", "pub"))


def test_where_the_index_comes_from(workspace, open_index):
    bump(workspace, "0.8.0")
    inside = workspace / "environments" / "my_env"
    from_inside = run_prime(["env", "push", "--visibility", "public", "--dry-run"], inside, {"HOME": str(workspace / "home")})
    assert from_inside.returncode == 0 and "would upload my-env 0.8.0 to pub" in from_inside.stdout, from_inside.stderr
    by_url = push(workspace, "-p", "environments/my_env", "-r", open_index.url)
    assert by_url.returncode == 0 and "pushed my-env 0.8.0 to pub" in by_url.stdout, by_url.stderr  # the table's name
    with PackageIndexServer(workspace.parent / "unnamed" / "packages") as unnamed:
        bump(workspace, "0.9.0")
        anonymous = push(workspace, "-p", "environments/my_env", "-r", unnamed.url)
    assert anonymous.returncode == 0, anonymous.stderr
    assert f"pushed my-env 0.9.0 to {unnamed.url}" in anonymous.stdout and "install it elsewhere with" not in anonymous.stdout
    assert "add an [[index]] table" in anonymous.stdout
    (workspace / "configs" / "endpoints.toml").unlink()
    (workspace / "home" / ".pypirc").write_text("[pypi]\nusername = __token__\npassword = pypi-not-a-real-token\n")
    never_pypi = push(workspace, "-p", "environments/my_env", "--dry-run")
    assert "~/.pypirc has pypi: name one with --repository NAME" in one_error_line(never_pypi)
    missing = push(workspace, "-p", "environments/my_env", "-e", "nonexistent.toml")
    assert "nonexistent.toml does not exist" in one_error_line(missing)


def test_names_and_folders_a_push_cannot_use(workspace):
    dotted = workspace / "environments" / "my_env" / "pyproject.toml"
    dotted.write_text(dotted.read_text().replace('name = "my-env"', 'name = "my.dotted.env"'))
    assert "use dashes: 'my-dotted-env'" in one_error_line(push(workspace, "-p", "environments/my_env", "-r", "pub"))
    (workspace / "no-project").mkdir()
    assert "no-project has no pyproject.toml, so it cannot be built" in one_error_line(
        push(workspace, "-p", "no-project", "-r", "pub"))
