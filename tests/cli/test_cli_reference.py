"""docs/cli.md, the flag tables generated from `--help`, is what the installed `prime` prints today."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.cli import REPO, run_prime

REFERENCE = REPO / "docs" / "cli.md"
GENERATOR = REPO / "scripts" / "cli_reference.py"


def test_the_reference_is_regenerated_when_a_flag_changes():
    result = subprocess.run([sys.executable, str(GENERATOR), "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr  # run `make docs` and commit docs/cli.md


def section(command: str) -> str:
    text = REFERENCE.read_text(encoding="utf-8")
    start = text.index(f"## `{command}`\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


@pytest.mark.parametrize("command", ["eval run", "gepa run", "train", "serve", "eval export", "eval view",
                                     "env init", "lab setup"])
def test_every_flag_help_prints_is_in_the_table(command):
    result = run_prime([*command.split(), "--help"], cwd=REPO, extra_env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    options = result.stdout.split("Options:", 1)[1]
    columns = re.findall(r"^ {2}(-\S.*?)(?: {2,}|$)", options, flags=re.MULTILINE)  # the flag column only
    printed = {flag for names in columns for flag in re.findall(r"--?[A-Za-z][\w.-]*", names)} - {"--help"}
    assert printed, options
    table = section(f"prime {command}")
    listed = set(re.findall(r"`(--?[A-Za-z][\w.-]*)`", table))
    assert printed <= listed, f"in --help but not in docs/cli.md: {sorted(printed - listed)}"
