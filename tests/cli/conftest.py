"""Fixtures for the command tests: a scripted OpenAI-compatible server and runs saved through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer


@pytest.fixture(scope="module")
def scripted():
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def saved_eval(tmp_path_factory, scripted) -> Path:
    """A workspace holding one completed reverse-text run, saved by `prime eval run -s`."""
    workspace = tmp_path_factory.mktemp("workspace")
    result = run_prime(["eval", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url,
                        "-n", "3", "-r", "2", "-s"], workspace)
    assert result.returncode == 0, result.stderr
    return workspace


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("metadata.json"))


def metadata(run_dir: Path) -> dict:
    return json.loads((run_dir / "metadata.json").read_text())
