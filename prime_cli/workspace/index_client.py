"""Read a package index's simple API (PEP 503): which versions of a project it holds.

Written on urllib rather than requests or httpx: one GET with basic auth, no redirect followed (an
index that redirects unknown projects to PyPI, as pypiserver does by default, must not make PyPI's
project of that name look like ours), and every failure turned into one line.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser

from .errors import WorkspaceError
from .indexes import PackageIndex

TIMEOUT_S = 15.0


def normalized(name: str) -> str:
    """The project name as the simple API spells it (PEP 503)."""
    from packaging.utils import canonicalize_name  # lazy: start-up

    return str(canonicalize_name(name))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href") or ""
            self.names.append(href.split("#", 1)[0].rsplit("/", 1)[-1])


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect on the same host (a moved index, http to https); one to another host is not
    followed, and reads as "not on this index" (pypiserver sends unknown projects on to PyPI)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        if urllib.parse.urlsplit(newurl).hostname != urllib.parse.urlsplit(req.full_url).hostname:
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _version_of(filename: str, project: str) -> str | None:
    from packaging.utils import (  # lazy: start-up
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return str(version) if normalized(name) == normalized(project) else None


def unreachable(index: PackageIndex, reason: object, url: str | None = None) -> WorkspaceError:
    """`url`: the one that failed, when it is not the upload URL (describe's)."""
    where = f"{index.name} ({url})" if url and index.name else (url or index.describe())
    return WorkspaceError(f"cannot reach index {where}: {reason}; is it running, and is the URL right?")


def refused(index: PackageIndex, status: int) -> WorkspaceError:
    var = f"${index.token_var}" if index.token_var else "the credentials configured for it"
    return WorkspaceError(f"index {index.describe()} refused the credentials (HTTP {status}); check the token in "
                          f"{var} and the user name ({index.user or 'none'}) in {index.source}")


def published_versions(index: PackageIndex, project: str) -> list[str]:
    """The versions of `project` the index holds, oldest first ([] when it has none)."""
    from packaging.version import InvalidVersion, Version  # lazy: start-up

    request = urllib.request.Request(f"{index.simple_url}{normalized(project)}/", headers={"Accept": "text/html"})
    credentials = index.credentials()
    if credentials is not None:
        pair = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {pair}")
    opener = urllib.request.build_opener(_SameHostRedirects)
    try:
        with opener.open(request, timeout=TIMEOUT_S) as response:
            page = response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise refused(index, exc.code) from None
        if exc.code == 404 or 300 <= exc.code < 400:
            return []
        raise unreachable(index, f"HTTP {exc.code}", index.simple_url) from None
    except (urllib.error.URLError, OSError) as exc:
        raise unreachable(index, getattr(exc, "reason", exc), index.simple_url) from None
    links = _Links()
    links.feed(page)
    versions = {version for name in links.names if (version := _version_of(name, project))}

    def key(text: str) -> Version | tuple[()]:
        try:
            return Version(text)
        except InvalidVersion:
            return ()

    return sorted(versions, key=key)


def published_as(version: str, published: list[str]) -> str | None:
    """The published version equal to `version` by PEP 440 (`2.0` is `2.0.0`), as the index spells it."""
    from packaging.version import InvalidVersion, Version  # lazy: start-up

    try:
        wanted = Version(version)
    except InvalidVersion:
        return version if version in published else None
    for candidate in published:
        try:
            if Version(candidate) == wanted:
                return candidate
        except InvalidVersion:
            continue
    return None


def next_version(version: str, published: list[str]) -> str:
    """The version to suggest instead of `version`: the newest published one with its last number raised."""
    from packaging.version import InvalidVersion, Version  # lazy: start-up

    try:
        newest = max([Version(v) for v in published] + [Version(version)])
    except InvalidVersion:
        return version + ".post1"
    release = list(newest.release)
    release[-1] += 1
    return ".".join(str(part) for part in release)
