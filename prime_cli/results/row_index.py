"""results.index: a side index of results.jsonl, so that a browser can sort and filter at once.

Sorting and filtering need every row's reward, metrics, error, stop condition and lengths; parsing
100,000 JSON rows for them takes seconds. The index holds those small fields as typed columns
(`RowColumns`) plus each line's byte range, so the big fields are read from results.jsonl only when
a row is opened. Layout: a first line `prime-results-index`, a JSON header line, then the binary
arrays (Python `array` bytes) the header points into. Column kinds:
  int    every value an int: array('q')
  float  every value a float: array('d')
  codes  anything else (text, flags, error dicts, mixed numbers): the distinct values (JSON) and one
         array('i') code per row, -1 for a row without the key.
int and float columns list the rows holding null (`none`) or lacking the key (`absent`).

It is only a cache. It is used while its stamp (size and mtime of results.jsonl when it was read)
matches the file; a missing, stale, foreign or damaged index means "parse results.jsonl", never an
error. The eval engine writes it when a run ends; `prime eval tui` writes it when it had to parse.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_cli.records.eval_rows import RESULTS_FILE
from prime_cli.records.eval_run import EvalRunLayout
from prime_cli.results.eval_reader import ResultsIndex
from prime_cli.results.row_columns import ABSENT, SECTION, RowColumns
from prime_cli.runs.atomic import write_atomic

INDEX_FILE = EvalRunLayout.INDEX
MAGIC = b"prime-results-index\n"
INDEX_VERSION = 1


@dataclass
class LoadedIndex:
    columns: RowColumns
    starts: array
    ends: array
    scanned: int  # bytes of results.jsonl the index covers
    identity: tuple[int, int]  # (st_dev, st_ino) of the results.jsonl it was checked against


def results_stamp(run_dir: Path) -> dict[str, int] | None:
    """What identifies results.jsonl's content for the index: its size and mtime (ns)."""
    try:
        stat = (Path(run_dir) / RESULTS_FILE).stat()
    except OSError:
        return None
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


# encoding ---------------------------------------------------------------------------------------
class _Body:
    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, values: array) -> list[int]:
        data = values.tobytes()
        self.parts.append(data)
        self.size += len(data)
        return [self.size - len(data), len(data)]


def _kind(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None and v is not ABSENT}
    if kinds == {int}:
        return "int"
    if kinds == {float}:
        return "float"
    return "codes"


def _encode_column(values: list[Any], body: _Body) -> dict[str, Any]:
    kind = _kind(values)
    if kind in ("int", "float"):
        gaps = {"none": [], "absent": []}
        dense = array("q" if kind == "int" else "d")
        for i, v in enumerate(values):
            if v is None or v is ABSENT:
                gaps["none" if v is None else "absent"].append(i)
                v = 0
            dense.append(v)
        return {"kind": kind, "at": body.add(dense), **gaps}
    distinct: dict[Any, int] = {}
    table: list[Any] = []
    codes = array("i")
    for v in values:
        if v is ABSENT:
            codes.append(-1)
            continue
        key = (type(v), v) if isinstance(v, (str, int, float, type(None))) else json.dumps(v)
        code = distinct.get(key)
        if code is None:
            code = distinct[key] = len(table)
            table.append(v)
        codes.append(code)
    return {"kind": "codes", "at": body.add(codes), "values": table}


def encode_index(columns: RowColumns, starts: Sequence[int], ends: Sequence[int], scanned: int,
                 stamp: dict[str, int]) -> bytes:
    body = _Body()
    top = {key: _encode_column([{} if v is SECTION else v for v in values], body)
           for key, values in columns.top.items()}
    subs = {key: {inner: _encode_column(values, body) for inner, values in inner_columns.items()}
            for key, inner_columns in columns.subs.items()}
    header = {"version": INDEX_VERSION, "byteorder": sys.byteorder, "results": stamp, "scanned": scanned,
              "count": columns.count, "starts": body.add(array("q", starts)), "ends": body.add(array("q", ends)),
              "top": top, "subs": subs}
    return MAGIC + json.dumps(header, separators=(",", ":")).encode("utf-8") + b"\n" + b"".join(body.parts)


# decoding ---------------------------------------------------------------------------------------
def _array(body: memoryview, at: list[int], typecode: str, count: int) -> array:
    offset, length = at
    values = array(typecode)
    values.frombytes(body[offset:offset + length])
    if len(values) != count or offset + length > len(body):
        raise ValueError("an index array of the wrong length")
    return values


def _decode_column(spec: dict[str, Any], body: memoryview, count: int) -> list[Any]:
    kind = spec["kind"]
    if kind in ("int", "float"):
        values = _array(body, spec["at"], "q" if kind == "int" else "d", count).tolist()
        for i in spec["none"]:
            values[i] = None
        for i in spec["absent"]:
            values[i] = ABSENT
        return values
    if kind != "codes":
        raise ValueError(f"unknown column kind {kind!r}")
    table = [*spec["values"], ABSENT]  # code -1 picks ABSENT
    codes = _array(body, spec["at"], "i", count)
    if codes and (min(codes) < -1 or max(codes) >= len(table) - 1):
        raise ValueError("an index code out of range")
    return [table[c] for c in codes]


def decode_index(data: bytes, stamp: dict[str, int]) -> tuple[RowColumns, array, array, int] | None:
    """The columns, line starts and ends and scanned bytes of an index written for `stamp`; None
    when it was written for another results.jsonl. Raises ValueError (or KeyError, TypeError,
    IndexError) when it is damaged."""
    if not data.startswith(MAGIC):
        raise ValueError("not a results index")
    newline = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC):newline])
    if header.get("version") != INDEX_VERSION or header.get("byteorder") != sys.byteorder or header.get("results") != stamp:
        return None
    body, count = memoryview(data)[newline + 1:], int(header["count"])
    columns = RowColumns(count, {key: _decode_column(spec, body, count) for key, spec in header["top"].items()},
                         {key: {inner: _decode_column(spec, body, count) for inner, spec in specs.items()}
                          for key, specs in header["subs"].items()})
    for key in columns.subs:  # a section's dict rows were written as {} in its own column
        columns.top[key] = [SECTION if isinstance(v, dict) else v for v in columns.top[key]]
    return (columns, _array(body, header["starts"], "q", count), _array(body, header["ends"], "q", count),
            int(header["scanned"]))


# files ------------------------------------------------------------------------------------------
def load_index(run_dir: Path) -> LoadedIndex | None:
    """The run's index when it exists, reads, and matches results.jsonl as it is now; else None."""
    run_dir = Path(run_dir)
    try:
        stat = (run_dir / RESULTS_FILE).stat()
        stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        decoded = decode_index((run_dir / INDEX_FILE).read_bytes(), stamp)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    if decoded is None:
        return None
    columns, starts, ends, scanned = decoded
    return LoadedIndex(columns, starts, ends, scanned, (stat.st_dev, stat.st_ino))


def save_index(run_dir: Path, columns: RowColumns, starts: Sequence[int], ends: Sequence[int], scanned: int,
               stamp: dict[str, int]) -> bool:
    """Write the index atomically; False (nothing written) when the folder is not writable.
    `stamp` is results.jsonl's `results_stamp` from before its rows were read, so a file changed
    meanwhile leaves a stale index rather than a wrong one."""
    try:
        write_atomic(Path(run_dir) / INDEX_FILE, encode_index(columns, starts, ends, scanned, stamp))
        return True
    except (OSError, ValueError, TypeError, OverflowError):
        return False


def write_index(run_dir: Path) -> bool:
    """Read the whole results.jsonl and write its index (the eval engine calls this when a run
    ends). False when there is no results.jsonl or the folder is not writable."""
    stamp = results_stamp(run_dir)
    if stamp is None:
        return False
    lines = ResultsIndex(Path(run_dir))
    try:
        lines.scan()
        columns = RowColumns()
        for row in lines.iter_rows():
            columns.append(row)
        starts, ends, scanned = lines.offsets()
    finally:
        lines.close()
    return save_index(run_dir, columns, starts, ends, scanned, stamp)
