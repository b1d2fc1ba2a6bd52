"""Run the real `prime` CLI in a subprocess against a scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def prime_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def run_prime(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "prime_cli", *args], cwd=cwd, env=prime_env(extra_env),
                          capture_output=True, text=True, timeout=timeout)


def popen_prime(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "prime_cli", *args], cwd=cwd, env=prime_env(extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def only_run_dir(root: Path) -> Path:
    runs = [p.parent for p in root.rglob("metadata.json")]
    assert len(runs) == 1, runs
    return runs[0]


def read_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def pairs(rows: list[dict]) -> list[tuple]:
    return sorted((r["example_id"], r["rollout_idx"]) for r in rows)
