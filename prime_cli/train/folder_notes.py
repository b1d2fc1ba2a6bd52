"""What a real run would say about its output directory, for `prime train --dry-run` (reads only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prime_cli.records.training_folder import (
    FolderBusy,
    fresh_start,
    fresh_start_refusal,
    lock_holder,
)
from prime_cli.runs.layouts import TrainingRunLayout

from .resume_check import ResumeConfigError, check_resume


def output_dir_notes(config: Any, resume_step: int | None) -> list[str]:
    """Warnings: the directory is in use, or a real run there would be refused (and why), or the notes a
    resume would print."""
    layout = TrainingRunLayout(Path(config.output_dir).resolve())
    notes = []
    if layout.output_dir.is_dir() and (holder := lock_holder(layout)) is not None:
        notes.append(f"warning: {FolderBusy(layout.output_dir, holder)}")
    if resume_step is None:
        found = fresh_start(layout)
        if found.in_the_way:
            notes.append(f"warning: a real run would refuse to start: {fresh_start_refusal(layout, found)}")
        return notes
    try:
        return notes + check_resume(layout, config, resume_step)
    except ResumeConfigError as exc:
        return [*notes, f"warning: a real run would refuse to resume: {exc}"]
