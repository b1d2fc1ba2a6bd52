"""Resolve `prime eval tui [PATH]` to the runs to show, without importing Textual (the CLI checks
the path and fails cleanly before the app starts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from prime_cli.records.training_run import is_training_run
from prime_cli.results.eval_reader import (
    RunEntry,
    default_roots,
    discover_runs,
    read_entry,
    training_entry,
)
from prime_cli.results.foreign_runs import is_foreign_run
from prime_cli.runs.metadata import METADATA_FILE, RunDirError

# how deep `prime eval tui` (no PATH) looks below the working folder when ./outputs and
# ./environments/*/outputs hold no run: `prime eval run -o out/evals` saves out/evals/<env>--<model>/<run_id>
SEARCH_DEPTH = 4


class NoRunsError(RunDirError):
    """No run folder where the user pointed (or in the default places)."""


@dataclass
class Located:
    entries: list[RunEntry]
    start: RunEntry | None = None  # the run to open directly
    roots: list[Path] = field(default_factory=list)  # folders searched (the browser's reload)
    rows_first: bool = False  # results.jsonl given: show its rows at once


def _top_folders(entries: list[RunEntry], base: Path) -> list[Path]:
    """The folders right below `base` that hold the entries (`base` itself for a run there): the roots a
    reload searches, rather than all of `base` again."""
    tops = set()
    for entry in entries:
        try:
            parts = entry.path.resolve().relative_to(base.resolve()).parts
        except ValueError:
            parts = ()
        tops.add(base / parts[0] if parts else base)
    return sorted(tops)


def locate(path: str | Path | None, cwd: str | Path | None = None) -> Located:
    """What `prime eval tui [PATH]` shows. A run folder opens that run; results.jsonl opens its
    rows; any other folder is searched for runs."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    if path is None:
        roots = default_roots(base)
        entries = discover_runs(roots)
        if not entries and base != Path(base.anchor):  # saved with -o elsewhere: look below the working folder
            entries = discover_runs([base], SEARCH_DEPTH, SEARCH_DEPTH)
            roots = _top_folders(entries, base)
        if not entries:
            raise NoRunsError(f"no runs under {base} ({SEARCH_DEPTH} folders deep, {base / 'outputs'} and "
                              f"{base / 'environments'}/*/outputs deeper); save one with `prime eval run ENV -s`, "
                              "or pass the folder that holds them (the -o of `prime eval run` or `prime train`): "
                              "`prime eval tui PATH`")
        return Located(entries, None, roots)
    target = Path(path).expanduser()
    target = target if target.is_absolute() else base / target
    if not target.exists():
        raise NoRunsError(f"{path} does not exist; pass a run folder or a folder holding runs (e.g. ./outputs)")
    rows_first = target.is_file() and target.suffix == ".jsonl"
    if target.is_file():
        target = target.parent
    if is_training_run(target):
        entry = training_entry(target)
        return Located([entry], entry, [target])
    if (target / METADATA_FILE).is_file() or is_foreign_run(target):
        entry = read_entry(target)
        return Located([entry], entry, [target], rows_first=rows_first and entry.kind == "eval")
    entries = discover_runs([target])
    if not entries:
        raise NoRunsError(f"no eval, GEPA or training runs under {path} (looked for folders holding metadata.json, "
                          "verifiers' traces.jsonl + configs/resolved/eval.json, or config.json with metrics.jsonl); "
                          "pass a run folder or an outputs folder")
    return Located(entries, None, [target])
