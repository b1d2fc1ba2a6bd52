"""Is a training checkpoint whole? Checked before a resume deletes anything, without torch.

torch.save writes a zip archive whose central directory sits at the end (a truncated file has none);
a safetensors file is an 8-byte header length, a JSON header, then exactly the bytes the header's
offsets name; the JSON files must parse. A file that passes loads as far as its structure goes.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

from .layouts import TrainingRunLayout

TRAINER_FILES = ("trainable.pt", "optimizer.pt", "scheduler.pt", "rng.pt", "state.json")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def file_problem(path: Path) -> str | None:
    """Why `path` cannot be loaded (missing, empty, truncated, unparsable), or None."""
    if not path.is_file():
        return f"{path.name} is missing"
    size = path.stat().st_size
    if size == 0:
        return f"{path.name} is empty"
    if path.suffix == ".json":
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"{path.name} is not valid JSON ({exc})"
        return None
    if path.suffix == ".pt":
        try:
            with zipfile.ZipFile(path) as archive:
                archive.infolist()
        except (OSError, zipfile.BadZipFile) as exc:
            return f"{path.name} is truncated or not a torch file ({exc})"
        return None
    if path.suffix == ".safetensors":
        return _safetensors_problem(path, size)
    return None


def _safetensors_problem(path: Path, size: int) -> str | None:
    try:
        with open(path, "rb") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
            if header_len > size - 8:
                return f"{path.name} is truncated (its header alone needs {header_len} bytes)"
            header = json.loads(handle.read(header_len))
    except (OSError, ValueError, struct.error) as exc:
        return f"{path.name} has no readable header ({exc})"
    if not isinstance(header, dict):
        return f"{path.name} has a header that is not a JSON object"
    ends = {name: _tensor_end(tensor) for name, tensor in header.items() if name != "__metadata__"}
    if bad := [name for name, end in ends.items() if end is None]:
        return f"{path.name} has a header entry without valid data_offsets ({bad[0]!r})"
    end = max(ends.values(), default=0)
    if size != 8 + header_len + end:
        return f"{path.name} is truncated ({size} bytes, its header names {8 + header_len + end})"
    return None


def _tensor_end(tensor: object) -> int | None:
    """Where a header entry's bytes end (its `data_offsets` [begin, end]), or None when it names none."""
    offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int and o >= 0 for o in offsets)):
        return None
    return offsets[1] if offsets[0] <= offsets[1] else None


def checkpoint_problem(layout: TrainingRunLayout, step: int) -> str | None:
    """The first reason checkpoints/step_N (with weights/step_N) cannot be resumed from, or None."""
    folders = [(layout.trainer_checkpoint(step), TRAINER_FILES + ADAPTER_FILES),
               (layout.weights_dir(step), ADAPTER_FILES)]
    for folder, names in folders:
        if not folder.is_dir():
            return f"{folder} is missing"
        for name in names:
            if problem := file_problem(folder / name):
                return f"{folder}/{problem}"
    if problem := file_problem(layout.orchestrator_checkpoint(step)):
        return f"{layout.checkpoint_dir(step)}/{problem}"
    return None


def last_good_checkpoint(layout: TrainingRunLayout, below: int) -> int | None:
    """The newest step under `below` whose checkpoint passes `checkpoint_problem`."""
    for step in reversed(layout.checkpoint_steps()):
        if step < below and checkpoint_problem(layout, step) is None:
            return step
    return None
