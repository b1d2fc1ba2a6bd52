"""The tiny model of the `prime train` end-to-end tests (train_runs.py), built once for the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from .train_runs import tiny_model


@pytest.fixture(scope="session")
def model(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-llama")
