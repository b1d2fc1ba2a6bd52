"""The environment args a training run used, so that its adapters are evaluated as they were trained: the
`evaluate it:` line at the end of `prime train` prints them as `-a`, and the checkpoint sweep (`prime eval run
ENV --weights-dir OUT/weights`) takes them from OUT/config.json unless `-a` is given, naming any difference.

One home for the rule: the run's `[[orchestrator.env]]` entry of that environment (what it trained on), else
its `[[orchestrator.eval.env]]` entry (what its online evals ran); environment ids match as
`load_environment` finds them (`owner/` dropped, dashes as underscores). Read only.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .layouts import TrainingRunLayout


def _module(env_id: str) -> str:
    return env_id.strip().split("/")[-1].replace("-", "_")


def run_env_ids(config: dict[str, Any]) -> list[str]:
    """The environment ids of a run's config (as config.json holds it): training first, then online evals."""
    return [entry["id"] for entry in _entries(config) if isinstance(entry.get("id"), str)]


def _entries(config: dict[str, Any]) -> list[dict[str, Any]]:
    orchestrator = config.get("orchestrator") or {}
    online = orchestrator.get("eval") or {}
    entries = [*(orchestrator.get("env") or []), *(online.get("env") or [])]
    return [entry for entry in entries if isinstance(entry, dict)]


def trained_env_args(config: dict[str, Any], env_id: str) -> dict[str, Any] | None:
    """The args the run gave `env_id` ({} when none), or None when the run has no such environment."""
    for entry in _entries(config):
        if isinstance(entry.get("id"), str) and _module(entry["id"]) == _module(env_id):
            args = entry.get("args") or {}
            return dict(args) if isinstance(args, dict) else {}
    return None


def run_config_path(weights_dir: Path) -> Path | None:
    """OUT/config.json of the run whose weights/ folder (or output folder) this is; None when there is none."""
    for folder in (weights_dir, weights_dir.parent):
        path = TrainingRunLayout(folder).config_path
        if path.is_file():
            return path
    return None


def read_run_config(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def env_args_flag(args: dict[str, Any]) -> str:
    """` -a '{"plain_text": true}'` to append to a `prime eval run` command ("" for no args)."""
    return f" -a {shlex.quote(json.dumps(args))}" if args else ""


def _value(args: dict[str, Any], key: str) -> str:
    return json.dumps(args[key], sort_keys=True) if key in args else "not given"


def args_difference(given: dict[str, Any], trained: dict[str, Any]) -> str | None:
    """`min_words 5 here, 8 in training; plain_text not given here, true in training` (None: the same)."""
    keys = [k for k in dict.fromkeys([*trained, *given]) if _value(given, k) != _value(trained, k)]
    if not keys:
        return None
    return "; ".join(f"{k} {_value(given, k)} here, {_value(trained, k)} in training" for k in keys)
