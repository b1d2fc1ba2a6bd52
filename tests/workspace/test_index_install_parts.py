"""The pure parts of installs from an index: what a target names, and the environments pip runs in."""

from __future__ import annotations

import os

import pytest

from prime_cli.workspace.errors import WorkspaceError
from prime_cli.workspace.index_install import (
    IndexRequest,
    extra_index_environment,
    only_index_environment,
    parse_request,
)
from prime_cli.workspace.install import environment_folder, is_local_target
from prime_cli.workspace.pip_failure import pip_failure_reason


@pytest.mark.parametrize(("target", "expected"), [
    ("my-env", IndexRequest(None, "my-env", None)),
    (" team/my-env ", IndexRequest("team", "my-env", None)),
    ("team/my-env==1.2.0", IndexRequest("team", "my-env", "1.2.0")),
    ("my_env==0.1", IndexRequest(None, "my_env", "0.1")),
])
def test_parse_request(target, expected):
    assert parse_request(target) == expected


@pytest.mark.parametrize(("target", "fragment"), [
    ("team/my-env==latest", "'latest' is not a version"),
    ("../my-env", "must name a configured package index"),
    ("/my-env", "must name a configured package index"),
    ("team/a/b", "path separator"),
    ("team/9lives", "is not valid"),
])
def test_parse_request_refuses(target, fragment):
    with pytest.raises(WorkspaceError, match=fragment.replace("(", r"\(")):
        parse_request(target)


def test_local_targets_are_folders_and_names_with_a_local_folder(tmp_path):
    (tmp_path / "environments" / "my_env").mkdir(parents=True)
    (tmp_path / "team" / "other").mkdir(parents=True)
    assert is_local_target("my-env", tmp_path) and is_local_target("./anything", tmp_path)
    assert is_local_target("environments/my_env", tmp_path) and is_local_target("team/other", tmp_path)
    assert not is_local_target("team/my-env", tmp_path) and not is_local_target("ghost", tmp_path)
    assert not is_local_target("my-env==0.1.0", tmp_path)  # a version is only ever on an index


def test_a_stray_folder_named_like_the_environment_is_not_local_without_a_pyproject(tmp_path):
    """As environment_folder decides: `pkg-env/` without pyproject.toml is no environment, so an index may hold it."""
    (tmp_path / "pkg-env").mkdir()
    assert not is_local_target("pkg-env", tmp_path)
    (tmp_path / "pkg-env" / "pyproject.toml").write_text("[project]\nname = 'pkg-env'\n")
    assert is_local_target("pkg-env", tmp_path)
    assert environment_folder("pkg-env", tmp_path) == (tmp_path / "pkg-env").resolve()


@pytest.mark.parametrize(("output", "reason"), [
    ("Looking in indexes: x\nERROR: Could not find a version that satisfies the requirement a==1 (from versions: none)\n"
     "ERROR: No matching distribution found for a==1", "No matching distribution found for a==1"),
    ("  error: subprocess-exited-with-error\n  x\n  note: This error originates from a subprocess\n"
     "ERROR: Failed to build 'a' when getting requirements to build wheel",
     "Failed to build 'a' when getting requirements to build wheel"),
    ("WARNING: something\nERROR: Some new failure\nmore", "Some new failure"),
    ("only this", "only this"),
])
def test_a_pip_failure_is_its_most_telling_line(output, reason):
    assert pip_failure_reason(output) == reason


def test_step_one_reads_only_our_index_and_keeps_network_settings(monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://pypi.org/simple/")
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror/simple/")
    monkeypatch.setenv("PIP_TIMEOUT", "60")
    monkeypatch.delenv("PIP_CERT", raising=False)
    config = {"global.extra-index-url": "https://other/simple/", "global.cert": "/ca.pem",
              "install.proxy": "http://proxy:3128", "global.find-links": "/more", "global.timeout": "5"}
    env = only_index_environment("http://u:t@ours/simple/", config)
    assert env["PIP_INDEX_URL"] == "http://u:t@ours/simple/" and env["PIP_CONFIG_FILE"] == os.devnull
    assert "PIP_FIND_LINKS" not in env and "PIP_EXTRA_INDEX_URL" not in env
    assert env["PIP_CERT"] == "/ca.pem" and env["PIP_PROXY"] == "http://proxy:3128"
    assert env["PIP_TIMEOUT"] == "60"  # the user's variable outranks their files, as in pip


def test_step_two_adds_our_index_after_the_users_own():
    config = {"global.extra-index-url": "https://a/simple/ https://b/simple/", ":env:.extra-index-url": "https://c/"}
    env = extra_index_environment("http://ours/simple/", config)
    assert env["PIP_EXTRA_INDEX_URL"] == "https://c/ http://ours/simple/"  # a variable outranks the files
    env = extra_index_environment("http://ours/simple/", {"global.extra-index-url": "https://a/simple/"})
    assert env["PIP_EXTRA_INDEX_URL"] == "https://a/simple/ http://ours/simple/"
    assert "PIP_INDEX_URL" not in env or env["PIP_INDEX_URL"] == os.environ.get("PIP_INDEX_URL")
