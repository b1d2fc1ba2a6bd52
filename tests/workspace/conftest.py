"""The toy environment `prime env check` is tried on (test_env_check.py's TOY), written where `prime` finds it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    from tests.workspace.test_env_check import TOY

    folder = tmp_path / "environments" / "toy_check"
    folder.mkdir(parents=True)
    (folder / "toy_check.py").write_text(TOY)
    return tmp_path
