"""metadata.json, the file every run folder (eval or GEPA) is recognised by, and the error of a folder
that is not a run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from prime_cli.envs.errors import UserInputError

METADATA_FILE = "metadata.json"


class RunDirError(UserInputError):
    """A path given as a run folder does not fit the request: not a run (missing or invalid metadata.json),
    or for training (the plugin raises it too) a fresh start over a run, a missing checkpoint, a folder in use."""


def read_metadata(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    run_dir, path = Path(run_dir), Path(run_dir) / METADATA_FILE
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory; expected an eval run folder holding {METADATA_FILE}")
    if not path.is_file():
        raise RunDirError(f"{path} not found: {run_dir} is not an eval run folder")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc}); fix or delete that run folder") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path} holds a JSON {type(data).__name__}, expected an object")
    return data
