"""Fixtures of the workspace tests: the toy environment `prime env check` is tried on (test_env_check.py's
TOY), and real package indexes (pypiserver, tests/support/package_index.py), started once per session:
`open_index` needs no authentication, `private_index` needs user `private_index.user` with token
`private_index.token` for everything. A test that stops one starts it again (same port) before it ends.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.package_index import PackageIndexServer


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    from tests.workspace.test_env_check import TOY

    folder = tmp_path / "environments" / "toy_check"
    folder.mkdir(parents=True)
    (folder / "toy_check.py").write_text(TOY)
    return tmp_path


@pytest.fixture(scope="session")
def open_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndexServer]:
    with PackageIndexServer(tmp_path_factory.mktemp("open-index") / "packages") as index:
        yield index


@pytest.fixture(scope="session")
def private_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndexServer]:
    users = {"alice": secrets.token_urlsafe(18)}
    with PackageIndexServer(tmp_path_factory.mktemp("private-index") / "packages", users) as index:
        yield index
