"""Run the installed `prime` script in a subprocess against a scripted server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.cli import PRIME, REPO, prime_env, run_prime  # noqa: F401


def popen_prime(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([str(PRIME), *args], cwd=cwd, env=prime_env(extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def only_run_dir(root: Path) -> Path:
    runs = [p.parent for p in root.rglob("metadata.json")]
    assert len(runs) == 1, runs
    return runs[0]


def read_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def pairs(rows: list[dict]) -> list[tuple]:
    return sorted((r["example_id"], r["rollout_idx"]) for r in rows)
