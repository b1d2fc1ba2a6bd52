"""What a folder named on the command line holds, so that no command writes into another's run.

`-o` of `prime eval run` is where run folders are created; `-o` of `prime gepa run` is the run folder
itself; `-R` / `--retry-errors` name an eval run folder. Each is checked (read only) before anything
is started or written: a GEPA search never lands in an eval run, an eval never resumes a GEPA run,
and neither writes into a folder of unrelated files.
"""

from __future__ import annotations

import json
from pathlib import Path

from .schema import MetadataRecord
from .store import METADATA_FILE, RESULTS_FILE, RunDirError

GEPA_FILES = ("state.json", "candidates.jsonl", "pareto_frontier.jsonl", "best_prompt.txt")
NEW_FOLDER = "pass a new or empty folder to -o/--run-dir"


def _metadata(path: Path) -> MetadataRecord | None:
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
        meta = _metadata(path) or {}
        return "gepa" if "reflection_model" in meta or "max_calls" in meta else "eval"
    return "other"


def _listing(path: Path, limit: int = 3) -> str:
    names = sorted(p.name for p in path.iterdir())
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_gepa_run_dir(path: Path) -> str:
    """The kind of a GEPA `-o` folder that may be used (missing, empty or gepa); raises otherwise."""
    kind = folder_kind(path)
    if kind == "file":
        raise RunDirError(f"-o {path} is a file, not a folder; {NEW_FOLDER}")
    if kind == "eval":
        raise RunDirError(f"-o {path} is an eval run folder (it holds {_listing(path)}); a GEPA run would "
                          f"overwrite it: {NEW_FOLDER}")
    if kind == "other":
        raise RunDirError(f"-o {path} is not empty and not a GEPA run (it holds {_listing(path)}); {NEW_FOLDER}")
    return kind


def check_eval_output_dir(output_dir: Path, base: Path) -> None:
    """`-o` of an eval is the folder run folders are created in (`base` = `<-o>/<env>--<model>`)."""
    kind = folder_kind(output_dir)
    if kind == "file":
        raise RunDirError(f"-o {output_dir} is a file; -o takes the folder that eval run folders are created in")
    if kind in ("eval", "gepa"):
        what = "an eval run" if kind == "eval" else "a GEPA run"
        hint = f"; to continue that run use -R {output_dir}" if kind == "eval" else ""
        raise RunDirError(f"-o {output_dir} is {what} folder itself; -o takes the folder that eval run folders are "
                          f"created in (e.g. outputs/evals){hint}")
    if base.exists() and not base.is_dir():
        raise RunDirError(f"{base} is a file; the run folders of this eval go there: pass another -o")


def read_eval_run(path: Path, flag: str) -> MetadataRecord:
    """The metadata of the eval run `path` named by `flag` (-R, --retry-errors); raises unless it is one."""
    kind = folder_kind(path)
    if kind == "missing":
        raise RunDirError(f"{flag} {path}: no such folder; pass the folder of a saved eval run "
                          "(outputs/evals/<env>--<model>/<run_id>)")
    if kind == "file":
        raise RunDirError(f"{flag} {path} is a file; pass the folder of a saved eval run")
    if kind == "gepa":
        meta = _metadata(path) or {}
        env = meta.get("env_id") or "ENV"
        raise RunDirError(f"{flag} {path} is a GEPA run folder, not an eval run; continue it with "
                          f"`prime gepa run {env} -o {path}`")
    if kind != "eval":
        raise RunDirError(f"{flag} {path} is not an eval run folder (no {METADATA_FILE}); pass the folder of a "
                          "saved eval run (outputs/evals/<env>--<model>/<run_id>)")
    meta = _metadata(path)
    if meta is None:
        raise RunDirError(f"{flag} {path}: {METADATA_FILE} is not a valid JSON object; fix or delete that run folder")
    if not isinstance(meta.get("num_examples"), int) or not isinstance(meta.get("rollouts_per_example"), int):
        raise RunDirError(f"{flag} {path}: {METADATA_FILE} has no num_examples / rollouts_per_example, so it cannot be "
                          "resumed")
    if (path / RESULTS_FILE).exists() and not (path / RESULTS_FILE).is_file():
        raise RunDirError(f"{flag} {path}: {RESULTS_FILE} is not a file")
    return meta
