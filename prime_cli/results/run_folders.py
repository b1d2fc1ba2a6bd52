"""The eval folders named on the command line: `-o` (where run folders are created) and `-R` /
`--retry-errors` (an eval run folder). What kind of folder a path is, and the GEPA `-o` check, are in
prime_cli/runs/folders.py.
"""

from __future__ import annotations

from pathlib import Path

from prime_cli.records.eval_rows import RESULTS_FILE
from prime_cli.records.eval_run import MetadataRecord
from prime_cli.runs.folders import folder_kind, folder_metadata
from prime_cli.runs.metadata import METADATA_FILE, RunDirError


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
        meta = folder_metadata(path) or {}
        env = meta.get("env_id") or "ENV"
        raise RunDirError(f"{flag} {path} is a GEPA run folder, not an eval run; continue it with "
                          f"`prime gepa run {env} -o {path}`")
    if kind != "eval":
        raise RunDirError(f"{flag} {path} is not an eval run folder (no {METADATA_FILE}); pass the folder of a "
                          "saved eval run (outputs/evals/<env>--<model>/<run_id>)")
    meta = folder_metadata(path)
    if meta is None:
        raise RunDirError(f"{flag} {path}: {METADATA_FILE} is not a valid JSON object; fix or delete that run folder")
    if not isinstance(meta.get("num_examples"), int) or not isinstance(meta.get("rollouts_per_example"), int):
        raise RunDirError(f"{flag} {path}: {METADATA_FILE} has no num_examples / rollouts_per_example, so it cannot be "
                          "resumed")
    if (path / RESULTS_FILE).exists() and not (path / RESULTS_FILE).is_file():
        raise RunDirError(f"{flag} {path}: {RESULTS_FILE} is not a file")
    return meta
