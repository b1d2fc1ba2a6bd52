"""Rows of a saved eval run as readers get them: results.jsonl parsed line by line (a torn last line,
left by a run killed mid-write, is left out; any other bad line is an error naming it), and `to_json`,
the strict JSON every eval file is written in. The writer is prime_cli/evals/store.py. See DESIGN.md, "Eval results on disk".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prime_cli.envs.errors import error_record
from prime_cli.records.eval_run import EvalRunLayout, PathLike, Rollout
from prime_cli.records.json_lines import iter_json_lines
from prime_cli.runs import json_lines
from prime_cli.runs.metadata import RunDirError

RESULTS_FILE = EvalRunLayout.RESULTS


def _fallback(obj: Any) -> Any:
    """What a value JSON cannot encode becomes: a plain equivalent, else its string."""
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        return obj.item()  # numpy / torch scalars
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, BaseException):
        return error_record(obj)
    return str(obj)


def _key(key: Any) -> str:
    """A dict key as JSON writes it (1 -> "1", True -> "true"); other keys as their str()."""
    if isinstance(key, str):
        return key
    return json.dumps(key) if key is None or isinstance(key, (bool, int, float)) else str(key)


def _clean(obj: Any) -> Any:
    """Recursive copy with NaN/inf as None, keys as strings and unknown values converted."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, dict):
        return {_key(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    converted = _fallback(obj)
    return converted if isinstance(converted, str) else _clean(converted)


def to_json(obj: Any, indent: int | None = None) -> str:
    """Strict JSON of `obj`: NaN/inf become null, unencodable values become strings."""
    try:
        return json_lines.dumps(obj, allow_nan=False, default=_fallback, indent=indent)
    except (ValueError, TypeError):  # NaN somewhere, or a non-string dict key
        return json_lines.dumps(_clean(obj), allow_nan=False, indent=indent)


def iter_results(run_dir: PathLike) -> Iterator[Rollout]:
    """Rows of results.jsonl by the one JSON-lines rule (prime_cli/records/json_lines.py): a torn last
    line is left out; any other bad line is a JsonLinesError naming file:line."""
    layout = EvalRunLayout(Path(run_dir))
    run_dir, path = layout.run_dir, layout.results_path
    if not path.is_file():
        if not layout.is_run():
            raise RunDirError(f"{path} not found: {run_dir} is not an eval run folder")
        return
    yield from iter_json_lines(path)  # type: ignore[misc]


def read_results(run_dir: PathLike) -> list[Rollout]:
    return list(iter_results(run_dir))
