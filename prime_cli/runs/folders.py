"""What a folder named on the command line holds, so that no command writes into another's run.

`-o` of `prime eval run` is where run folders are created; `-o` of `prime gepa run` is the run folder
itself; `-R` / `--retry-errors` name an eval run folder. Each is checked (read only) before anything
is started or written: a GEPA search never lands in an eval run, an eval never resumes a GEPA run,
and neither writes into a folder of unrelated files. The checks of eval folders are in
prime_cli/results/run_folders.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .layouts import GepaRunLayout
from .metadata import METADATA_FILE, RunDirError

GEPA_FILES = (GepaRunLayout.STATE, GepaRunLayout.CANDIDATES, GepaRunLayout.FRONTIER, GepaRunLayout.BEST_PROMPT)
NEW_FOLDER = "pass a new or empty folder to -o/--run-dir"


def folder_metadata(path: Path) -> dict[str, Any] | None:
    """The metadata.json object of `path`, or None when it is missing or not a JSON object."""
    try:
        data = json.loads((path / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def folder_kind(path: Path) -> str:
    """"missing", "file", "empty", "gepa" (a GEPA run), "eval" (an eval run) or "other"."""
    if not path.exists():
        return "missing"
    if not path.is_dir():
        return "file"
    names = {p.name for p in path.iterdir()}
    if not names:
        return "empty"
    if names & set(GEPA_FILES):
        return "gepa"
    if METADATA_FILE in names:
        meta = folder_metadata(path) or {}
        return "gepa" if "reflection_model" in meta or "max_calls" in meta else "eval"
    return "other"


def listing(path: Path, limit: int = 3) -> str:
    """The first names in `path`, for an error message."""
    names = sorted(p.name for p in path.iterdir())
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_gepa_run_dir(path: Path) -> str:
    """The kind of a GEPA `-o` folder that may be used (missing, empty or gepa); raises otherwise."""
    kind = folder_kind(path)
    if kind == "file":
        raise RunDirError(f"-o {path} is a file, not a folder; {NEW_FOLDER}")
    if kind == "eval":
        raise RunDirError(f"-o {path} is an eval run folder (it holds {listing(path)}); a GEPA run would "
                          f"overwrite it: {NEW_FOLDER}")
    if kind == "other":
        raise RunDirError(f"-o {path} is not empty and not a GEPA run (it holds {listing(path)}); {NEW_FOLDER}")
    return kind
