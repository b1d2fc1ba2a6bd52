"""[wandb.log_extras], the trainer's half: the step's rollouts/step_N/extras.json (written by the orchestrator,
which has the texts: orchestrator/wandb_extras.py) as W&B objects logged with the step's numbers: the table
`samples` (one table per logged step; W&B's step slider goes through them) and the histograms
`distributions/reward` and `distributions/advantage`. A step without the file logs none; a file that cannot be
read costs its step's extras, never the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import TrainingRunLayout

from .wandb_run import first_line, say


def read_extras(output_dir: Path, step: int) -> dict[str, Any] | None:
    path = TrainingRunLayout(output_dir).batch_extras_path(step)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        say(f"step {step}: the W&B extras in {path} could not be read ({type(exc).__name__}); none logged for it")
        return None


def extras_payload(output_dir: Path, step: int) -> dict[str, Any]:
    """What wandb.log gets for the step's extras ({} when it has none)."""
    extras = read_extras(output_dir, step)
    if not extras:
        return {}
    import wandb

    payload: dict[str, Any] = {}
    try:
        if extras.get("rows"):
            payload["samples"] = wandb.Table(columns=extras["columns"], data=extras["rows"])
        for name, values in (extras.get("distributions") or {}).items():
            if values:
                payload[f"distributions/{name}"] = wandb.Histogram(values)
    except Exception as exc:  # noqa: BLE001 - W&B never stops a training run
        say(f"step {step}: the W&B extras could not be built ({type(exc).__name__}: {first_line(exc)}); "
            "none logged for it")
        return {}
    return payload
