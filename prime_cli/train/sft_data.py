"""SFT data: one [[data.source]] read into conversations (torch-free; the orchestrator tokenizes them).

A source is (a) a .jsonl/.json/.parquet file of `messages` or `prompt`/`completion` rows, (b) a Hugging Face
dataset folder (save_to_disk output, or a folder of data files; a dataset name is looked up in the local
Hugging Face cache, never downloaded), or (c) a saved `prime eval run -s` run folder, or a folder holding
such runs, whose rollouts are kept by reward (`min_reward`, `best_per_example`). Rows that cannot be
trained on are counted by reason (`SourceRows.bad`, `describe_bad`), never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_cli.results.eval_reader import RunEntry, discover_runs

from .config_sft import SftSource
from .errors import TrainConfigError
from .sft_eval_runs import read_eval_runs
from .sft_files import file_rows, folder_data_files, is_data_file, saved_dataset_files
from .sft_rows import Conversation, RowProblem, SourceRows, data_row

# TrainConfigError: what read_source raises (one line), exported with it
__all__ = ["FORMATS", "Conversation", "SourceRows", "TrainConfigError", "describe_bad", "hub_snapshot", "locate", "read_source"]

FORMATS = ("a .jsonl, .json or .parquet file of messages or prompt/completion rows, a Hugging Face dataset "
           "folder (save_to_disk, or data files), or a `prime eval run -s` run folder (or a folder of them)")


def describe_bad(bad: dict[str, int]) -> str:
    """`3 rows skipped: 2 no assistant turn, 1 missing column messages` (most first; empty when none)."""
    total = sum(bad.values())
    if not total:
        return ""
    reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(bad.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{total} row{'s' if total != 1 else ''} skipped: {reasons}"


def _count(bad: dict[str, int], reason: str) -> None:
    bad[reason] = bad.get(reason, 0) + 1


def _take(rows: Iterator[tuple[str, Any]], max_rows: int | None, bad: dict[str, int]) -> list[Conversation]:
    """Conversations of data rows, up to max_rows good ones; every other row counted by reason."""
    out: list[Conversation] = []
    for origin, row in rows:
        if max_rows is not None and len(out) >= max_rows:
            break
        try:
            if isinstance(row, RowProblem):
                raise row
            out.append(data_row(row, origin))
        except RowProblem as problem:
            _count(bad, problem.reason)
    return out


def _files_rows(files: list[Path]) -> Iterator[tuple[str, Any]]:
    for path in files:
        yield from file_rows(path)


def hub_snapshot(name: str) -> Path | None:
    """A dataset repository's snapshot in the local Hugging Face cache (None: not there, or no huggingface_hub)."""
    try:
        from huggingface_hub import snapshot_download  # lazy: optional dependency
    except ImportError:
        return None
    try:
        return Path(snapshot_download(name, repo_type="dataset", local_files_only=True))
    except Exception:  # noqa: BLE001 - not a repo id, not cached, an unreadable cache: all mean "not here"
        return None


def _eval_runs(folder: Path) -> list[RunEntry]:
    return [entry for entry in discover_runs([folder]) if entry.kind == "eval"]


def _resolve(source: SftSource, base: Path) -> tuple[Path, str]:
    """The path the source names (and how to name it in lines): a path, else a cached hub dataset."""
    path = Path(source.dataset).expanduser()
    if not path.is_absolute():
        path = base / path
    if path.exists():
        return path, source.dataset
    snapshot = hub_snapshot(source.dataset) if not source.dataset.startswith((".", "/", "~")) else None
    if snapshot is not None:
        return snapshot, f"{source.dataset} (Hugging Face cache)"
    raise TrainConfigError(f"data.source dataset {source.dataset!r}: no such file or folder ({path}), and not a "
                           "dataset in the local Hugging Face cache: nothing is downloaded. Give a path to "
                           f"{FORMATS}, or download it first (hf download {source.dataset} --repo-type dataset)")


@dataclass
class Located:
    """What a source names, found but not read: data files, or eval runs."""

    name: str  # the source as lines name it
    description: str
    files: list[Path] = field(default_factory=list)
    runs: list[RunEntry] = field(default_factory=list)  # eval runs


def locate(source: SftSource, base: Path) -> Located:
    """The files (or eval runs) of a source, without reading its rows: `prime train` checks every source with it
    before anything starts. A missing path or a format that is not read raises TrainConfigError (one line)."""
    found = _locate(source, base)
    if not found.runs and (source.min_reward is not None or source.best_per_example):
        raise TrainConfigError(f"data.source dataset {found.name}: min_reward and best_per_example filter the rollouts "
                               "of saved eval runs by their reward, and this is not an eval run: remove them")
    return found


def _locate(source: SftSource, base: Path) -> Located:
    path, name = _resolve(source, base)
    if path.is_file():
        if not is_data_file(path):
            raise TrainConfigError(f"data.source dataset {name}: a {path.suffix or 'suffix-less'} file is not read; "
                                   f"give {FORMATS}")
        return Located(name, name, files=[path])
    files = saved_dataset_files(path, source.split)
    if files is not None:
        return Located(name, f"{name} (saved dataset, {source.split})", files=files)
    runs = _eval_runs(path)
    if runs:
        return Located(name, name, runs=runs)
    files = folder_data_files(path, source.split)
    if not files:
        raise TrainConfigError(f"data.source dataset {name}: no data in this folder; give {FORMATS}")
    return Located(name, f"{name} ({len(files)} data file{'s' if len(files) != 1 else ''})", files=files)


def read_source(source: SftSource, base: Path) -> SourceRows:
    """The conversations of one source (a relative path is taken from `base`). A missing path or a format
    that is not read raises TrainConfigError (one line)."""
    found = locate(source, base)
    if found.runs:
        return read_eval_runs(found.runs, source, found.name)
    bad: dict[str, int] = {}
    return SourceRows(_take(_files_rows(found.files), source.max_rows, bad), bad, found.description)
