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


@pytest.fixture(scope="module")
def saved_gepa(tmp_path_factory, scripted) -> Path:
    """A finished (small) GEPA run folder of reverse-text, made by `prime gepa run -o`."""
    workspace = tmp_path_factory.mktemp("gepa-workspace")
    run_dir = workspace / "gepa-run"
    result = run_prime(["gepa", "run", "reverse-text", "-m", "scripted-model", "-b", scripted.url, "-n", "4",
                        "-N", "2", "-B", "14", "--plain", "-o", str(run_dir)], workspace)
    assert result.returncode == 0, result.stderr
    assert (run_dir / "state.json").is_file()
    return run_dir


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (relative path -> bytes): equal snapshots mean nothing was written."""
    if root.is_file():
        return {root.name: root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def one_error_line(result, *needles: str) -> str:
    """Exit 2 and exactly one `error: ` line on stderr, naming every needle; no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def record_local_server(cache: Path, server: ScriptedOpenAIServer, **fields) -> dict[str, str]:
    """A `prime serve` record in `cache` for `server`: `-m local` (the default model) uses it as the
    running embedded server, as it would use a real `prime serve`. `fields` add to the record (e.g.
    lora=True, max_lora_rank=16: a server started with --enable-lora). Returns the environment to pass."""
    import os

    from prime_cli.serve.embedded import EMBEDDED_NAME

    (cache / "servers").mkdir(parents=True, exist_ok=True)
    record = {"pid": os.getpid(), "port": server.port, "url": server.url, "models": [EMBEDDED_NAME],
              "model_path": str(cache / "model"), "started_at": 0, **fields}
    (cache / "servers" / f"{server.port}.json").write_text(json.dumps(record))
    return {"PRIME_CACHE_DIR": str(cache)}
