"""What a real run would say about its output directory, for `prime train --dry-run` (reads only)."""

from __future__ import annotations

from pathlib import Path

from prime_cli.runs.layouts import TrainingRunLayout
from prime_cli.runs.training_folder import FolderBusy, fresh_start, fresh_start_refusal, lock_holder


def output_dir_notes(output_dir: str | Path, resume_step: int | None) -> list[str]:
    """Warnings: the directory is in use, or a fresh start there would be refused (and why)."""
    layout = TrainingRunLayout(Path(output_dir).resolve())
    if not layout.output_dir.is_dir():
        return []
    notes = []
    if (holder := lock_holder(layout)) is not None:
        notes.append(f"warning: {FolderBusy(layout.output_dir, holder)}")
    if resume_step is None:
        found = fresh_start(layout)
        if found.in_the_way:
            notes.append(f"warning: a real run would refuse to start: {fresh_start_refusal(layout, found)}")
    return notes
