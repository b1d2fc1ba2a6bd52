"""`prime eval export RUN --format csv|parquet|jsonl`: a saved run's rows as one file for other tools.

- jsonl: the rows as results.jsonl holds them (a truncated last line left out).
- csv, parquet: one column per row field plus `metrics.<name>` per metric. Columns holding nested
  values (prompt and completion messages, metrics, info, timing...) are JSON strings, so every tool
  reads them the same way (parquet's nested types need one shape per column; rows need not agree).
Parquet needs pyarrow (`pip install pyarrow`, or `pip install 'prime-cli[parquet]'`); it is not a
core dependency (about 170 MB installed).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from prime_cli.envs.errors import UserInputError
from prime_cli.records.eval_rows import to_json
from prime_cli.records.eval_run import EvalRunLayout, PathLike
from prime_cli.results.eval_run import EvalRun, load_run
from prime_cli.runs.atomic import write_atomic

FORMATS = ("csv", "parquet", "jsonl")


class ExportError(UserInputError):
    """An export that cannot be written as asked (a missing library, a bad output path)."""


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401  # lazy: optional dependency
    except ImportError:
        raise ExportError("--format parquet needs pyarrow, which is not installed: pip install pyarrow "
                          "(or export --format csv or jsonl)") from None


def default_output(run: EvalRun, fmt: str, cwd: Path) -> Path:
    """`./<env>--<model>--<run_id>.<fmt>` in the current folder."""
    return cwd / f"{run.path.parent.name}--{run.path.name}.{fmt}"


def _check_output(output: Path, run: EvalRun, fmt: str) -> None:
    if output.resolve().parent == run.path.resolve() and output.name in (
            EvalRunLayout.RESULTS, EvalRunLayout.METADATA, EvalRunLayout.LOG):
        raise ExportError(f"-o {output} is a file of the run itself; pass another file name")
    if output.is_dir():
        raise ExportError(f"-o {output} is a folder; pass a file name (e.g. {default_output(run, fmt, output)})")
    if not output.parent.is_dir():
        raise ExportError(f"-o {output}: folder {output.parent} does not exist; create it or pass another path")


def flat_records(run: EvalRun) -> list[dict[str, Any]]:
    """Records whose nested values (dicts, lists) are JSON strings, column by column."""
    records = run.records()
    nested = {key for record in records for key, value in record.items() if isinstance(value, (dict, list))}
    for record in records:
        for key in nested:
            if record[key] is not None:
                record[key] = to_json(record[key])
    return records


def _frame(run: EvalRun) -> Any:
    import pandas as pd  # lazy: heavy

    columns = list(run.records()[0]) if run.rows else run.columns()
    return pd.DataFrame.from_records(flat_records(run), columns=columns)


def _writer(run: EvalRun, fmt: str):
    if fmt == "jsonl":
        return lambda fh: fh.writelines((to_json(row) + "\n").encode("utf-8") for row in run.rows)
    if fmt == "csv":
        def write_csv(fh: IO[bytes]) -> None:
            fh.write(_frame(run).to_csv(index=False).encode("utf-8"))
        return write_csv

    def write_parquet(fh: IO[bytes]) -> None:
        _frame(run).to_parquet(fh, index=False, engine="pyarrow")
    return write_parquet


def export_run(path: PathLike, fmt: str, output: PathLike | None = None, cwd: PathLike | None = None) -> tuple[Path, int]:
    """Write the rows of the eval run at `path` as `fmt` to `output` (default: see `default_output`).
    Returns the file written and the number of rows. The run folder is only read."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        _require_pyarrow()
    base = Path(cwd) if cwd is not None else Path.cwd()
    run = load_run(path if Path(path).is_absolute() else base / path)
    target = Path(output).expanduser() if output is not None else default_output(run, fmt, base)
    target = target if target.is_absolute() else base / target
    _check_output(target, run, fmt)
    write_atomic(target, _writer(run, fmt), durable=True)
    return target, len(run.rows)
