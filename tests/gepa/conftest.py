"""Fixtures of the GEPA engine tests."""

import pytest

from tests.gepa import support


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder with the toy environment written in it, as the working directory."""
    support.write_toy_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path
