"""Shared fixtures: where the example data lives (../shared/data next to the repo, else tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def data_root() -> Path:
    shared = REPO.parent / "shared" / "data"
    return shared if (shared / "gsm8k" / "test.jsonl").is_file() else REPO / "tests" / "data"


@pytest.fixture
def data_dir() -> Path:
    return data_root()
