"""Eval run folders other tools wrote, opened as ours: detect the format, convert once into a cache.

Formats opened (the field mapping and the verifiers sources read are in foreign_rows.py):
- "verifiers-0.4": `traces.jsonl` (one v1 trace, or one episode holding traces, per line) and the
  resolved config `configs/resolved/eval.json` (or `configs/eval.json`, where later versions moved it).
- "verifiers-0.3": `results.jsonl` + `metadata.json` written by verifiers 0.3 or an older prime CLI:
  a metadata.json without our `status` that carries one of their keys (`pass_all_k`, `path_to_save`,
  `time`, `version_info.vf_version`).
Their JSON-lines files are read by prime's one rule (prime_cli/records/json_lines.py): a torn last line is
left out, any other bad line is an error naming file:line.

Why a converted copy rather than a reader per format: every reader (load_run, export, compare, the
TUI's lazy ResultsIndex and its results.index cache) works on our layout, and the TUI seeks by byte
offset in results.jsonl; one conversion keeps them all unchanged. The copy goes to
`<cache>/foreign-runs/<hash of the source path>/<parent name>/<folder name>` (so export's default
file name stays `<parent>--<folder>.<fmt>`), never into the user's folder, and is rebuilt only when
a source file's size or mtime changed. Its metadata.json names its `source` (path, format).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from prime_cli.records.json_lines import iter_json_lines
from prime_cli.runs.json_lines import read_json_object
from prime_cli.runs.metadata import METADATA_FILE, RunDirError
from prime_cli.runs.status import RunStatus

from . import foreign_rows

TRACES_FILE = "traces.jsonl"
V1_CONFIGS = ("configs/resolved/eval.json", "configs/eval.json")
RESULTS_FILE = "results.jsonl"
V03_MARKERS = ("pass_all_k", "path_to_save", "time")
EXPECTED = ("an eval run folder: metadata.json + results.jsonl (prime, verifiers 0.3) or traces.jsonl + "
            "configs/resolved/eval.json (verifiers 0.4)")


def cache_dir() -> Path:
    """The rule of prime_cli/serve/paths.py `cache_dir`, restated: the TUI reads runs through this
    module and may not import prime_cli.serve."""
    if os.environ.get("PRIME_CACHE_DIR"):
        return Path(os.environ["PRIME_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "prime"


def _v1_config_path(folder: Path) -> Path | None:
    return next((folder / name for name in V1_CONFIGS if (folder / name).is_file()), None)


def detect_format(folder: Path) -> str | None:
    """"verifiers-0.4", "verifiers-0.3", or None (ours, or nothing we know)."""
    if not folder.is_dir():
        return None
    if (folder / METADATA_FILE).is_file():
        meta = read_json_object(folder / METADATA_FILE) or {}
        version = meta.get("version_info") if isinstance(meta.get("version_info"), dict) else {}
        foreign = any(key in meta for key in V03_MARKERS) or "vf_version" in version
        return "verifiers-0.3" if "status" not in meta and foreign and (folder / RESULTS_FILE).is_file() else None
    if (folder / TRACES_FILE).is_file() and _v1_config_path(folder) is not None:
        return "verifiers-0.4"
    return None


def _source_files(folder: Path, fmt: str) -> list[Path]:
    if fmt == "verifiers-0.4":
        return [folder / TRACES_FILE, _v1_config_path(folder)]  # type: ignore[list-item]
    return [folder / RESULTS_FILE, folder / METADATA_FILE]


def _stamp(files: list[Path]) -> dict[str, list[int]]:
    return {f.name: [f.stat().st_size, f.stat().st_mtime_ns] for f in files}


def cache_folder(folder: Path) -> Path:
    source = folder.resolve()
    digest = hashlib.sha256(str(source).encode()).hexdigest()[:16]
    return cache_dir() / "foreign-runs" / digest / (source.parent.name or "root") / (source.name or "root")


def _rows(folder: Path, fmt: str) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    rows = []
    if fmt == "verifiers-0.4":
        traces = (t for line in iter_json_lines(folder / TRACES_FILE) for t in foreign_rows.v1_traces(line))
        for trace in traces:
            key = json.dumps(foreign_rows.v1_example_id(trace), sort_keys=True, default=str)
            rows.append(foreign_rows.v1_row(trace, counts.setdefault(key, 0)))
            counts[key] += 1
        return rows
    for raw in iter_json_lines(folder / RESULTS_FILE):
        if isinstance(raw.get("rollout_idx"), int):
            rows.append(foreign_rows.v03_row(raw, raw["rollout_idx"]))
            continue
        key = json.dumps(raw.get("example_id", raw.get("id")), sort_keys=True, default=str)
        rows.append(foreign_rows.v03_row(raw, counts.setdefault(key, 0)))
        counts[key] += 1
    return rows


def _metadata(folder: Path, fmt: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from .summary import metadata_fields, summarize  # lazy: start-up

    if fmt == "verifiers-0.4":
        config_path = _v1_config_path(folder)
        meta = foreign_rows.v1_metadata(read_json_object(config_path) or {} if config_path else {}, folder.name)
        meta["date"] = _iso(os.stat(folder / TRACES_FILE).st_mtime)
    else:
        meta = foreign_rows.v03_metadata(read_json_object(folder / METADATA_FILE) or {})
    examples = {json.dumps(row.get("example_id"), sort_keys=True, default=str) for row in rows}
    meta.setdefault("num_examples", len(examples))
    if not isinstance(meta.get("rollouts_per_example"), int):
        meta["rollouts_per_example"] = max((row["rollout_idx"] + 1 for row in rows), default=1)
    summary = summarize(rows)  # type: ignore[arg-type]
    theirs = {key: meta[key] for key in ("avg_reward", "avg_metrics", "pass_at_k", "pass_hat_k", "avg_error", "usage") if key in meta}
    meta.update(metadata_fields(summary))
    if theirs:
        meta["source_summary"] = theirs  # the averages their tool wrote, kept next to ours
    meta["status"] = RunStatus.COMPLETED_WITH_ERRORS if summary.get("avg_error") else RunStatus.COMPLETED
    return meta


def _iso(timestamp: float) -> str:
    from datetime import UTC, datetime  # lazy: already loaded

    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def convert(folder: Path, fmt: str) -> Path:
    """The converted copy of `folder` (made, or remade when its source files changed)."""
    target = cache_folder(folder)
    stamp = _stamp(_source_files(folder, fmt))
    existing = read_json_object(target / METADATA_FILE)
    if existing and (existing.get("source") or {}).get("stamp") == stamp and (target / RESULTS_FILE).is_file():
        return target
    rows = _rows(folder, fmt)
    meta = _metadata(folder, fmt, rows)
    meta["source"] = {"path": str(folder.resolve()), "format": fmt, "stamp": stamp}
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    with (staging / RESULTS_FILE).open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, default=str) + "\n")
    (staging / METADATA_FILE).write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    try:
        os.replace(staging, target)
    except OSError:  # another prime converted it meanwhile: keep theirs when it is of these sources
        shutil.rmtree(staging, ignore_errors=True)
        done = read_json_object(target / METADATA_FILE) or {}
        if (done.get("source") or {}).get("stamp") != stamp:
            raise
    return target


def resolve_run_dir(folder: Path) -> Path:
    """`folder` itself, or its converted copy when another tool wrote it."""
    fmt = detect_format(folder)
    if fmt is None:
        return folder
    try:
        return convert(folder, fmt)
    except OSError as exc:
        raise RunDirError(f"{folder}: could not convert this {fmt} run into {cache_folder(folder)}: {exc}") from None


def is_foreign_run(folder: Path) -> bool:
    return detect_format(folder) is not None
