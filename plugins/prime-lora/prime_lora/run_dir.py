"""The output directory of a training run: what a fresh start refuses and what a resume rewinds.
Its files and step folders are named by `TrainingRunLayout` (prime_cli.train.plugin_api)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from prime_cli.train.plugin_api import TrainingRunLayout, steps_in, write_text_atomic

__all__ = ["RunDirError", "checkpoint_steps", "prepare", "steps_in"]


class RunDirError(Exception):
    """The output directory does not fit the request (fresh start over a run, missing checkpoint)."""


def checkpoint_steps(output_dir: Path) -> list[int]:
    """Steps a run can resume from: a trainer checkpoint and the orchestrator's progress."""
    return TrainingRunLayout(output_dir).checkpoint_steps()


def prepare(output_dir: Path, resume_step: int | None) -> None:
    """Check the directory for a fresh start, or rewind it to `resume_step` (later steps removed)."""
    layout = TrainingRunLayout(output_dir)
    if resume_step is None:
        trained = layout.weight_steps()
        if any(step > 0 for step in trained) or layout.metrics_path.exists():
            resumable = layout.checkpoint_steps()
            hint = (f"continue it with --resume-step {resumable[-1]}" if resumable
                    else "it has no checkpoint to resume from")
            raise RunDirError(f"{output_dir} already holds a training run (up to step {max(trained, default=0)}); "
                              f"{hint}, or pick another directory with --output-dir")
        for sub in layout.STEP_FOLDERS:
            shutil.rmtree(output_dir / sub, ignore_errors=True)
        layout.evals_path.unlink(missing_ok=True)  # a step-0 eval of a run that never trained
        return
    available = layout.checkpoint_steps()
    if resume_step not in available:
        listed = ", ".join(map(str, available)) or "none"
        raise RunDirError(f"no checkpoint for step {resume_step} in {output_dir / layout.CHECKPOINTS} "
                          f"(available: {listed})")
    if not layout.weights_dir(resume_step).is_dir():
        raise RunDirError(f"{layout.weights_dir(resume_step)} is missing; cannot resume at step {resume_step}")
    for sub in layout.STEP_FOLDERS:
        for step in layout.steps(sub):
            if step > resume_step:
                shutil.rmtree(layout.step_dir(sub, step), ignore_errors=True)
    for path in (layout.metrics_path, layout.evals_path):
        if not path.exists():
            continue
        kept = []
        for line in path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= resume_step:
                    kept.append(line)
            except ValueError:
                continue  # a line cut short by a kill
        write_text_atomic(path, "".join(line + "\n" for line in kept))
