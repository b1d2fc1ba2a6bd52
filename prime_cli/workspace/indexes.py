"""Package indexes environments are pushed to and installed from.

Two sources, read in this order:

- `[[index]]` tables in configs/endpoints.toml (`-e PATH`)::

      [[index]]
      name = "my-team"                          # OWNER in `prime env install my-team/my-env`
      url = "https://pypi.example.com/simple/"  # the simple index pip reads
      upload_url = "https://pypi.example.com/"  # optional: default is `url` without its simple/
      user = "alice"                            # optional: default __token__
      token = "MY_TEAM_INDEX_TOKEN"             # optional: the NAME of the variable holding the token
      visibility = "private"                    # optional: `prime env push --visibility private` picks it

- the sections of ~/.pypirc (twine's file): the section name is the index name, `repository` its
  upload URL, `username`/`password` its credentials. pip needs the simple URL, which pypirc does not
  hold: `pypi` and `testpypi` have known ones, any other section gets `repository` + simple/ (the
  layout of pypiserver) unless the section sets `simple_url`.

A token is read from the environment when a command needs it and is only ever passed in memory
(twine's settings) or in a child process's environment (pip's index URL): never argv, disk or logs.
"""

from __future__ import annotations

import configparser
import os
import re
import tomllib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkspaceError

VISIBILITIES = ("public", "private")
DEFAULT_USER = "__token__"
KNOWN_SIMPLE_URLS = {
    "https://upload.pypi.org/legacy/": "https://pypi.org/simple/",
    "https://test.pypi.org/legacy/": "https://test.pypi.org/simple/",
}
PYPIRC_DEFAULT_REPOSITORIES = {"pypi": "https://upload.pypi.org/legacy/", "testpypi": "https://test.pypi.org/legacy/"}
TOKEN_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*")
INDEX_KEYS = ("name", "url", "upload_url", "user", "token", "visibility")


@dataclass(frozen=True)
class PackageIndex:
    name: str
    simple_url: str  # ends with "/"
    upload_url: str
    source: str  # where it was configured, for messages
    user: str | None = None
    token_var: str | None = None  # the environment variable holding the token (endpoints.toml)
    password: str | None = None  # from ~/.pypirc only: the user's own file
    visibility: str | None = None
    from_pypirc: bool = False  # never picked without being named: its `pypi` section would publish to PyPI

    def credentials(self) -> tuple[str, str] | None:
        """(user, token), or None for an index without authentication. A token variable that is named
        but not set is an error: an upload without it would fail only after the build."""
        if self.token_var:
            token = os.environ.get(self.token_var)
            if not token:
                raise WorkspaceError(f"index {self.name!r} ({self.source}) reads its token from ${self.token_var}, "
                                     f"which is not set; export {self.token_var}=... and retry")
            return self.user or DEFAULT_USER, token
        if self.password:
            return self.user or DEFAULT_USER, self.password
        return None

    def describe(self) -> str:
        return f"{self.name} ({self.upload_url})" if self.name else self.upload_url


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def _check_url(url: object, where: str, key: str) -> str:
    if isinstance(url, str) and urllib.parse.urlsplit(url).password:
        fix = ("set TWINE_USERNAME and TWINE_PASSWORD instead" if where == "--repository" else
               "put the token in an environment variable and name it with token = \"VAR\"")
        raise WorkspaceError(f"{where}: {key} holds a password, which would be shown and saved; {fix}")
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https") \
            or not urllib.parse.urlsplit(url).netloc:
        raise WorkspaceError(f"{where}: {key} must be an http(s) URL (got {url!r})")
    return _with_slash(url)


def simple_to_upload(simple_url: str) -> str:
    for upload, simple in KNOWN_SIMPLE_URLS.items():
        if simple == simple_url:
            return upload
    return simple_url[: -len("simple/")] if simple_url.endswith("/simple/") else simple_url


def upload_to_simple(upload_url: str) -> str:
    return KNOWN_SIMPLE_URLS.get(upload_url, upload_url + "simple/")


def _index_block(block: object, number: int, path: Path) -> PackageIndex:
    where = f"{path}: index {number}"
    if not isinstance(block, dict):
        raise WorkspaceError(f"{where}: expected a table ([[index]])")
    unknown = sorted(set(block) - set(INDEX_KEYS))
    if unknown:
        raise WorkspaceError(f"{where}: unknown key {unknown[0]!r}; an [[index]] has {', '.join(INDEX_KEYS)}")
    name = block.get("name")
    if not isinstance(name, str) or not name.strip() or "/" in name:
        raise WorkspaceError(f"{where}: name must be a word without '/' (the OWNER in OWNER/my-env), got {name!r}")
    simple = _check_url(block.get("url"), where, "url")
    upload = _check_url(block["upload_url"], where, "upload_url") if "upload_url" in block else simple_to_upload(simple)
    visibility = block.get("visibility")
    if visibility is not None and visibility not in VISIBILITIES:
        raise WorkspaceError(f"{where}: visibility must be public or private (got {visibility!r})")
    token = block.get("token")
    if token is not None and (not isinstance(token, str) or not TOKEN_VARIABLE.fullmatch(token)):
        raise WorkspaceError(f"{where}: token must be the NAME of an environment variable in capitals (like "
                             "MY_INDEX_TOKEN), never the token itself (its value is not shown here)")
    user = block.get("user")
    return PackageIndex(name.strip(), simple, upload, str(path), user if isinstance(user, str) else None,
                        token, None, visibility)


def endpoints_indexes(path: Path) -> list[PackageIndex]:
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"cannot read {path}: {exc}") from None
    blocks = data.get("index", [])
    if not isinstance(blocks, list):
        raise WorkspaceError(f"{path}: 'index' must be written as [[index]] tables")
    return [_index_block(block, number, path) for number, block in enumerate(blocks, start=1)]


def pypirc_path() -> Path:
    return Path.home() / ".pypirc"


def pypirc_indexes(path: Path | None = None) -> list[PackageIndex]:
    path = path or pypirc_path()
    if not path.is_file():
        return []
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise WorkspaceError(f"cannot read {path}: {exc}") from None
    names = parser.sections()
    if parser.has_option("distutils", "index-servers"):
        names = parser.get("distutils", "index-servers").split()
    indexes = []
    for name in names:
        if name == "distutils" or not parser.has_section(name):
            continue
        section = dict(parser.items(name))
        upload = section.get("repository") or PYPIRC_DEFAULT_REPOSITORIES.get(name)
        if not upload:
            continue
        where = f"{path} [{name}]"
        upload = _check_url(upload, where, "repository")
        simple = _check_url(section["simple_url"], where, "simple_url") if "simple_url" in section \
            else upload_to_simple(upload)
        indexes.append(PackageIndex(name, simple, upload, str(path), section.get("username"), None,
                                    section.get("password"), None, from_pypirc=True))
    return indexes


def configured_indexes(endpoints_path: Path | None = None, root: Path | None = None) -> list[PackageIndex]:
    """Every index: endpoints.toml's first, then ~/.pypirc's sections not named there too. A path given
    (-e) must exist; the default configs/endpoints.toml may not."""
    if endpoints_path is not None and not endpoints_path.is_file():
        raise WorkspaceError(f"{endpoints_path} does not exist (-e/--endpoints-path names the file with the "
                             "[[index]] tables)")
    indexes = endpoints_indexes(endpoints_path or (root or Path.cwd()) / "configs" / "endpoints.toml")
    named = {index.name for index in indexes}
    return indexes + [index for index in pypirc_indexes() if index.name not in named]


def _names(indexes: list[PackageIndex]) -> str:
    return ", ".join(f"{i.name}" + (f" ({i.visibility})" if i.visibility else "") for i in indexes) or "none"


SETUP_HINT = ("add an [[index]] table to configs/endpoints.toml (`prime lab setup` writes a commented one) "
              "or a section to ~/.pypirc")


def index_named(name: str, indexes: list[PackageIndex]) -> PackageIndex:
    for index in indexes:
        if index.name == name:
            return index
    raise WorkspaceError(f"no package index named {name!r} (configured: {_names(indexes)}); {SETUP_HINT}")


def pick_index(indexes: list[PackageIndex], repository: str | None = None,
               visibility: str | None = None) -> PackageIndex:
    """The index `--repository NAME|URL` or `--visibility` names, or the only one configured."""
    if repository and "://" in repository:
        upload = _check_url(repository, "--repository", "the URL")
        for index in indexes:  # a configured index given by its URL keeps its name and credentials
            if upload in (index.upload_url, index.simple_url):
                return index
        user, token = os.environ.get("TWINE_USERNAME"), os.environ.get("TWINE_PASSWORD")
        return PackageIndex("", upload_to_simple(upload), upload, "--repository", user,
                            "TWINE_PASSWORD" if token else None, None, visibility)
    if repository:
        return index_named(repository, indexes)
    if visibility:
        matching = [index for index in indexes if index.visibility == visibility]
        if len(matching) == 1:
            return matching[0]
        if not matching:
            raise WorkspaceError(f"no index is configured with visibility = \"{visibility}\" "
                                 f"(configured: {_names(indexes)}); {SETUP_HINT}")
        raise WorkspaceError(f"several indexes have visibility = \"{visibility}\" ({_names(matching)}); "
                             "pick one with --repository NAME")
    tables = [index for index in indexes if not index.from_pypirc]
    if len(tables) == 1:
        return tables[0]
    if not tables:
        named = f" (~/.pypirc has {_names(indexes)}: name one with --repository NAME)" if indexes else ""
        raise WorkspaceError(f"no package index is configured in an [[index]] table{named}; {SETUP_HINT}, "
                             "or give --repository URL")
    raise WorkspaceError(f"several package indexes are configured ({_names(tables)}); "
                         "pick one with --repository NAME or --visibility public|private")


def with_credentials(url: str, credentials: tuple[str, str] | None) -> str:
    """`url` with user:token in it, for pip's environment only (pip redacts it in what it prints)."""
    if credentials is None:
        return url
    parts = urllib.parse.urlsplit(url)
    user, token = (urllib.parse.quote(part, safe="") for part in credentials)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{token}@{parts.netloc}"))


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "****").replace(urllib.parse.quote(secret, safe=""), "****")
    return text
