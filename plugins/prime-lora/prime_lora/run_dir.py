"""The output directory of a training run: what a fresh start refuses and what a resume rewinds."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

STEP_DIR = re.compile(r"^step_(\d+)$")


class RunDirError(Exception):
    """The output directory does not fit the request (fresh start over a run, missing checkpoint)."""


def steps_in(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := STEP_DIR.match(p.name)))


def checkpoint_steps(output_dir: Path) -> list[int]:
    """Steps a run can resume from: a trainer checkpoint and the orchestrator's progress."""
    root = output_dir / "checkpoints"
    return [s for s in steps_in(root)
            if (root / f"step_{s}" / "trainer").is_dir() and (root / f"step_{s}" / "orchestrator.json").is_file()]


def prepare(output_dir: Path, resume_step: int | None) -> None:
    """Check the directory for a fresh start, or rewind it to `resume_step` (later steps removed)."""
    if resume_step is None:
        trained = steps_in(output_dir / "weights")
        if any(step > 0 for step in trained) or (output_dir / "metrics.jsonl").exists():
            resumable = checkpoint_steps(output_dir)
            hint = (f"continue it with --resume-step {resumable[-1]}" if resumable
                    else "it has no checkpoint to resume from")
            raise RunDirError(f"{output_dir} already holds a training run (up to step {max(trained, default=0)}); "
                              f"{hint}, or pick another directory with --output-dir")
        for sub in ("rollouts", "weights", "checkpoints"):
            shutil.rmtree(output_dir / sub, ignore_errors=True)
        return
    available = checkpoint_steps(output_dir)
    if resume_step not in available:
        listed = ", ".join(map(str, available)) or "none"
        raise RunDirError(f"no checkpoint for step {resume_step} in {output_dir / 'checkpoints'} "
                          f"(available: {listed})")
    if not (output_dir / "weights" / f"step_{resume_step}").is_dir():
        raise RunDirError(f"{output_dir / 'weights' / f'step_{resume_step}'} is missing; cannot resume at step {resume_step}")
    for sub in ("rollouts", "weights", "checkpoints"):
        for step in steps_in(output_dir / sub):
            if step > resume_step:
                shutil.rmtree(output_dir / sub / f"step_{step}", ignore_errors=True)
    metrics = output_dir / "metrics.jsonl"
    if metrics.exists():
        import json

        kept = []
        for line in metrics.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= resume_step:
                    kept.append(line)
            except ValueError:
                continue  # a line cut short by a kill
        metrics.write_text("".join(line + "\n" for line in kept))
