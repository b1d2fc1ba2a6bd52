"""The files of SFT data: JSON lines, a JSON list, Parquet, and the Arrow files of a Hugging Face dataset saved
with `save_to_disk` (a DatasetDict's split sub-folder, or a Dataset folder), or a folder of data files (a dataset
repository: `data/train-*.parquet`, `train.jsonl`). Rows come out one by one as (origin, row), or
(origin, RowProblem) for a line that is no row. pyarrow is imported only for Parquet and Arrow files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import TrainConfigError
from .sft_rows import UNREADABLE, RowProblem

DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".arrow")
SPLIT_NAMES = ("train", "test", "validation", "valid", "dev", "eval")
Row = tuple[str, "dict[str, Any] | RowProblem"]


def _pyarrow(path: Path) -> Any:
    try:
        import pyarrow  # noqa: F401  # lazy: optional dependency
    except ImportError:
        raise TrainConfigError(f"{path}: reading Parquet and Arrow files needs pyarrow; install it "
                               "(pip install 'prime-cli[parquet]') or give the rows as JSON lines") from None
    import pyarrow.ipc  # lazy: optional dependency
    import pyarrow.parquet  # lazy: optional dependency

    return pyarrow


def _jsonl(path: Path) -> Iterator[Row]:
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            origin = f"{path.name} line {number}"
            try:
                row = json.loads(line)
            except ValueError:
                yield origin, RowProblem(UNREADABLE)
                continue
            yield origin, row if isinstance(row, dict) else RowProblem("a line that is not a JSON object")


def _json(path: Path) -> Iterator[Row]:
    try:
        data = json.loads(path.read_bytes())
    except ValueError:
        yield from _jsonl(path)  # many datasets name JSON lines `.json`
        return
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))  # {"data": [...]}
    if not isinstance(data, list):
        raise TrainConfigError(f"{path}: a .json data file holds a list of rows (or one row per line); this one "
                               f"holds a JSON {type(data).__name__}")
    for index, row in enumerate(data):
        yield f"{path.name} row {index}", row if isinstance(row, dict) else RowProblem("a row that is not a JSON object")


def _table_rows(path: Path, batches: Iterator[Any]) -> Iterator[Row]:
    index = 0
    for batch in batches:
        for row in batch.to_pylist():
            yield f"{path.name} row {index}", row
            index += 1


def _parquet(path: Path) -> Iterator[Row]:
    pa = _pyarrow(path)
    try:
        handle = pa.parquet.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise TrainConfigError(f"{path}: not a readable Parquet file ({exc})") from None
    yield from _table_rows(path, handle.iter_batches(batch_size=1024))


def _arrow(path: Path) -> Iterator[Row]:
    """save_to_disk writes the Arrow IPC stream format; the file format is read too."""
    pa = _pyarrow(path)
    try:
        reader = pa.ipc.open_stream(path)
    except pa.ArrowInvalid:
        try:
            reader = pa.ipc.open_file(path)
        except (OSError, pa.ArrowException) as exc:
            raise TrainConfigError(f"{path}: not a readable Arrow file ({exc})") from None
        yield from _table_rows(path, (reader.get_batch(i) for i in range(reader.num_record_batches)))
        return
    yield from _table_rows(path, iter(reader))


READERS = {".jsonl": _jsonl, ".json": _json, ".parquet": _parquet, ".arrow": _arrow}


def file_rows(path: Path) -> Iterator[Row]:
    return READERS[path.suffix.lower()](path)


def is_data_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in DATA_SUFFIXES


def saved_dataset_files(folder: Path, split: str) -> list[Path] | None:
    """The Arrow files of a `save_to_disk` folder (None: not one). A DatasetDict folder (dataset_dict.json)
    has one sub-folder per split: `split` is read."""
    if (folder / "dataset_dict.json").is_file():
        try:
            splits = json.loads((folder / "dataset_dict.json").read_text()).get("splits") or []
        except (ValueError, AttributeError):
            splits = []
        splits = splits or sorted(p.name for p in folder.iterdir() if (p / "state.json").is_file())
        if split not in splits:
            raise TrainConfigError(f"{folder}: a dataset with the splits {', '.join(splits) or '(none)'}, not "
                                   f"{split!r}; set split = one of them in [[data.source]]")
        folder = folder / split
    if not (folder / "state.json").is_file():
        return None
    try:
        named = [f.get("filename") for f in json.loads((folder / "state.json").read_text()).get("_data_files", [])]
    except (ValueError, AttributeError):
        named = []
    files = [folder / name for name in named if isinstance(name, str)] or sorted(folder.glob("data-*.arrow"))
    missing = [f.name for f in files if not f.is_file()]
    if missing or not files:
        raise TrainConfigError(f"{folder}: a saved dataset whose Arrow files are missing ({', '.join(missing) or 'none'})")
    return files


def folder_data_files(folder: Path, split: str) -> list[Path]:
    """The data files of a dataset folder: those whose path (below the folder) names `split`; every one when
    none names any split. Hidden folders (.cache, .git) are left out."""
    files = sorted(p for p in folder.rglob("*") if is_data_file(p)
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    named = [p for p in files if split in p.relative_to(folder).as_posix()]
    if named:
        return named
    if any(name in p.relative_to(folder).as_posix() for p in files for name in SPLIT_NAMES):
        listed = ", ".join(p.relative_to(folder).as_posix() for p in files[:5])
        raise TrainConfigError(f"{folder}: no data file of split {split!r} (found {listed}"
                               f"{', ...' if len(files) > 5 else ''}); set split in [[data.source]]")
    return files
