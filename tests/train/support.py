"""Shared helpers of the `prime train` tests: small config files and the CLI in a subprocess."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.environments.conftest import data_root
from tests.evals.cli_support import REPO, run_prime

MINIMAL = """
[orchestrator]
batch_size = 16
rollouts_per_example = 4

[[orchestrator.env]]
id = "reverse-text"
"""


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_train(args: list[str], cwd: Path = REPO, extra_env: dict[str, str] | None = None):
    """`prime train ARGS` in a fresh interpreter, with test data for the data-backed environments."""
    return run_prime(["train", *args], cwd, {"PRIME_DATA_DIR": str(data_root()), **(extra_env or {})})


def assert_one_error_line(result, *fragments: str) -> str:
    """Exit code 2, and stderr is exactly one `error:` line (a subprocess or a typer runner result)."""
    code = getattr(result, "returncode", getattr(result, "exit_code", None))
    assert code == 2, (result.stdout, result.stderr)
    assert getattr(result, "exception", None) is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
