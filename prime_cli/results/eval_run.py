"""A saved eval run as data: `load_run(path)` -> typed rows and metadata, and a pandas DataFrame.

    run = prime_cli.evals.load_run("outputs/evals/reverse-text--gpt-4.1-mini/20260101-120000-abc123")
    run.metadata.avg_reward, len(run.rows), run.rows[0]["reward"]
    df = run.to_pandas()  # one row per rollout; metrics also as `metrics.<name>` columns

pandas is imported only by `to_pandas`, so loading a run (and `prime --help`) stays light.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prime_cli.records.eval_rows import read_results
from prime_cli.records.eval_run import ROW_KEYS, EvalRunLayout, PathLike, Rollout, RunMetadata
from prime_cli.runs.metadata import RunDirError, read_metadata

from .foreign_runs import EXPECTED, TRACES_FILE, resolve_run_dir
from .run_folders import folder_kind

if TYPE_CHECKING:
    import pandas as pd

METRIC_PREFIX = "metrics."


@dataclass
class EvalRun:
    """One eval run folder, read: its metadata (validated) and its rows in file order."""

    layout: EvalRunLayout
    metadata: RunMetadata
    rows: list[Rollout]

    @property
    def path(self) -> Path:
        return self.layout.run_dir

    @property
    def source_path(self) -> Path:
        """The folder the user named: `path`, or for another tool's run the folder it was converted from."""
        source = (self.metadata.model_extra or {}).get("source")
        return Path(source["path"]) if isinstance(source, dict) and source.get("path") else self.path

    def columns(self) -> list[str]:
        """The row keys in contract order, then the extra (state) columns in order of appearance."""
        seen = dict.fromkeys(key for key in ROW_KEYS if any(key in row for row in self.rows))
        for row in self.rows:
            seen.update(dict.fromkeys(row))
        return list(seen)

    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for row in self.rows:
            metrics = row.get("metrics")
            if isinstance(metrics, dict):
                names.update(dict.fromkeys(metrics))
        return list(names)

    def records(self) -> list[dict[str, Any]]:
        """Every row with every column (missing values as None) and `metrics.<name>` added."""
        columns, metric_names = self.columns(), self.metric_names()
        out = []
        for row in self.rows:
            record = {column: row.get(column) for column in columns}
            metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
            record.update((METRIC_PREFIX + name, metrics.get(name)) for name in metric_names)
            out.append(record)
        return out

    def to_pandas(self) -> pd.DataFrame:
        """One row per rollout: the row's fields (nested ones as Python objects) and one float
        column per metric, `metrics.<name>`."""
        import pandas as pd  # lazy: heavy

        columns = self.columns() + [METRIC_PREFIX + name for name in self.metric_names()]
        return pd.DataFrame.from_records(self.records(), columns=columns)


def run_folder(path: PathLike) -> Path:
    """The run folder `path` names: the folder itself, or its results.jsonl / metadata.json (or
    verifiers' traces.jsonl). Another tool's run folder names its converted copy (foreign_runs.py)."""
    path = Path(path).expanduser()
    if path.is_file() and path.name in (EvalRunLayout.RESULTS, EvalRunLayout.METADATA, TRACES_FILE):
        path = path.parent
    kind = folder_kind(path)
    if kind == "missing":
        raise RunDirError(f"{path}: no such folder; pass an eval run folder (outputs/evals/<env>--<model>/<run_id>)")
    if kind == "gepa":
        raise RunDirError(f"{path} is a GEPA run folder, not an eval run; pass an eval run folder "
                          "(outputs/evals/<env>--<model>/<run_id>)")
    converted = resolve_run_dir(path) if kind in ("eval", "other") else path
    if converted != path:
        return converted
    if kind != "eval":
        raise RunDirError(f"{path} is not an eval run folder; expected {EXPECTED}")
    return path


def load_run(path: PathLike) -> EvalRun:
    """Read the eval run at `path` (a run folder, or its results.jsonl / metadata.json).

    Runs written by older versions load: missing metadata fields get their defaults and a truncated
    last line of results.jsonl is left out. Raises `RunDirError` when `path` is not an eval run."""
    run_dir = run_folder(path)
    record = read_metadata(run_dir)
    try:
        metadata = RunMetadata.from_record(record)
    except ValueError as exc:  # pydantic's ValidationError: name the first bad field
        raise RunDirError(f"{EvalRunLayout(run_dir).metadata_path}: {_first_error(exc)}") from None
    return EvalRun(EvalRunLayout(run_dir), metadata, read_results(run_dir))


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors) and errors():
        first = errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where}: {first.get('msg')} (got {first.get('input')!r})"
    return str(exc).splitlines()[0]
