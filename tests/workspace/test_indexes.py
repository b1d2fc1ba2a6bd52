"""Where package indexes are configured ([[index]] tables, ~/.pypirc) and how one is picked."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from prime_cli.workspace import provenance
from prime_cli.workspace.errors import WorkspaceError
from prime_cli.workspace.index_client import next_version
from prime_cli.workspace.indexes import (
    configured_indexes,
    endpoints_indexes,
    pick_index,
    redact,
    with_credentials,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_index_tables_and_pypirc_sections(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    endpoints = write(tmp_path / "configs" / "endpoints.toml", '''
[[endpoint]]
endpoint_id = "m"
model = "m"
url = "http://127.0.0.1:1/v1"

[[index]]
name = "team"
url = "https://pypi.example.com/simple"
user = "alice"
token = "TEAM_TOKEN"
visibility = "private"
''')
    write(tmp_path / "home" / ".pypirc", "[distutils]\nindex-servers =\n  pypi\n  team\n  devpi\n\n[pypi]\nusername = __token__\n\n"
          "[team]\nrepository = http://ignored.example/\n\n[devpi]\nrepository = http://h:3141/me/dev/\n"
          "simple_url = http://h:3141/me/dev/+simple/\npassword = p\n")
    indexes = configured_indexes(endpoints)
    assert [(i.name, i.simple_url, i.upload_url) for i in indexes] == [
        ("team", "https://pypi.example.com/simple/", "https://pypi.example.com/"),  # endpoints.toml wins
        ("pypi", "https://pypi.org/simple/", "https://upload.pypi.org/legacy/"),
        ("devpi", "http://h:3141/me/dev/+simple/", "http://h:3141/me/dev/"),
    ]
    assert pick_index(indexes, visibility="private").name == "team"
    assert pick_index(indexes, repository="devpi").credentials() == ("__token__", "p")
    with pytest.raises(WorkspaceError, match=r"\$TEAM_TOKEN, which is not set"):
        indexes[0].credentials()
    monkeypatch.setenv("TEAM_TOKEN", "t0k")
    assert indexes[0].credentials() == ("alice", "t0k")
    assert pick_index(indexes).name == "team"  # the only [[index]]: a ~/.pypirc section is never the default
    with pytest.raises(WorkspaceError, match=r"~/.pypirc has pypi, devpi: name one with --repository NAME"):
        pick_index(indexes[1:])
    with pytest.raises(WorkspaceError, match="does not exist"):
        configured_indexes(tmp_path / "nonexistent.toml")
    with pytest.raises(WorkspaceError, match='no index is configured with visibility = "public"'):
        pick_index(indexes, visibility="public")


@pytest.mark.parametrize(("table", "message"), [
    ('name = "a"\nurl = "ftp://x/"', "url must be an http"),
    ('name = "a"\nurl = "https://u:secret@x/simple/"', "holds a password"),
    ('name = "a"\nurl = "https://x/simple/"\ntoken = "pypi-AgEIcHlwaS5vcmc"', "NAME of an environment variable"),
    ('name = "a"\nurl = "https://x/simple/"\ntoken = "ghp_R8x2aQ7LmZ9wK3vN5tY1uB6c"', "value is not shown"),
    ('name = "a"\nurl = "ftp://bob:SUPERSECRET@x/"', "holds a password"),
    ('name = "a/b"\nurl = "https://x/simple/"', "without '/'"),
    ('name = "a"\nurl = "https://x/simple/"\nvisibility = "team"', "public or private"),
    ('name = "a"\nurl = "https://x/simple/"\npassword = "x"', "unknown key 'password'"),
])
def test_bad_index_tables_name_the_problem(tmp_path, table, message):
    path = write(tmp_path / "endpoints.toml", f"[[index]]\n{table}\n")
    with pytest.raises(WorkspaceError, match=message) as raised:
        endpoints_indexes(path)
    assert "SUPERSECRET" not in str(raised.value) and "R8x2aQ7" not in str(raised.value)


def test_credentials_only_in_urls_for_pip_and_redacted():
    url = with_credentials("http://127.0.0.1:9/simple/", ("al ice", "t/k@n"))
    assert url == "http://al%20ice:t%2Fk%40n@127.0.0.1:9/simple/"
    assert redact(f"GET {url} failed with t/k@n", ["t/k@n"]) == "GET http://al%20ice:****@127.0.0.1:9/simple/ failed with ****"


def test_next_version():
    assert next_version("0.1.0", ["0.1.0"]) == "0.1.1"
    assert next_version("0.1.0", ["0.1.0", "0.2.3", "0.1.9"]) == "0.2.4"
    assert next_version("1.0", ["1.0"]) == "1.1"


def test_provenance_is_added_to_the_wheel_record(tmp_path):
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("x.py", "X = 1\n")
        archive.writestr("x-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n")
        archive.writestr("x-1.0.dist-info/RECORD", "x.py,sha256=abc,6\nx-1.0.dist-info/METADATA,,\nx-1.0.dist-info/RECORD,,\n")
    provenance.add_to_wheel(wheel, {"prime_version": "0.1.0", "check": {"verdict": "passed", "examples": 3}})
    provenance.add_to_wheel(wheel, {"prime_version": "0.1.0", "check": {"verdict": "skipped"}})  # replaced, not doubled
    assert provenance.read_from_wheel(wheel)["check"] == {"verdict": "skipped"}
    with zipfile.ZipFile(wheel) as archive:
        record = archive.read("x-1.0.dist-info/RECORD").decode().splitlines()
        assert archive.namelist().count("x-1.0.dist-info/prime_provenance.json") == 1
    assert record[-1] == "x-1.0.dist-info/RECORD,," and sum("prime_provenance.json,sha256=" in r for r in record) == 1
    assert provenance.describe({"prime_version": "0.1.0", "index": "team", "pushed_at": "2026-11-29T04:00Z",
                                "check": {"verdict": "passed", "examples": 3}}) == (
        "pushed 2026-11-29T04:00Z to team with prime 0.1.0; prime env check passed on 3 rows")


def test_upload_refusals_and_check_reports_are_read_right():
    from prime_cli.workspace.push import _report_from
    from prime_cli.workspace.push_upload import _already_there

    assert _already_there(409, "Conflict") and _already_there(400, "File already exists")
    assert not _already_there(400, "Bad Request: invalid metadata") and not _already_there(500, "exists")
    report = '{\n "ok": true,\n "examples": 3\n}'
    assert _report_from("loading...\n" + report + "\n{bye}\n") == {"ok": True, "examples": 3}
    assert _report_from("{bye}\n") is None and _report_from("") is None
