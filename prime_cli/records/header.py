"""The versioned header a run's metadata.json starts with: format version, kind, run id, status, when it
was created and finished (ISO 8601 UTC) and its error.

A writer puts the header's keys first (`new_header`, `with_header`) and keeps them current through `header_update`;
every key a kind wrote before stays beside them (`date` of an eval, `completed_at` of a GEPA run).
`read_header` reads the header of any run: the one written, or for a file written before headers
existed (format version 0), one derived from the keys that file has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from typing_extensions import TypedDict

from prime_cli.runs.status import RunStatus

FORMAT_VERSION = 1
RunKind = Literal["eval", "gepa", "training"]
KINDS: tuple[RunKind, ...] = ("eval", "gepa", "training")


class Header(TypedDict):
    format_version: int  # 0: derived from a file written before headers
    kind: RunKind
    run_id: str
    status: str  # a RunStatus value; a file without one is another tool's finished run: "completed"
    created_at: str | None
    finished_at: str | None  # None while it runs
    error: str | None


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_header(kind: RunKind, run_id: str) -> Header:
    """The header of a run starting now."""
    return {"format_version": FORMAT_VERSION, "kind": kind, "run_id": run_id, "status": RunStatus.RUNNING,
            "created_at": utc_now(), "finished_at": None, "error": None}


def with_header(header: Header, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """`metadata` after the header's keys, the header's values winning: a file copied from another run
    (a rescore copies its source's metadata) keeps none of that run's header."""
    return {**header, **metadata, **header}


def header_update(metadata: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The header keys that follow from merging `fields` into `metadata`: a new status sets `finished_at`
    (now when it ends, None when it runs again). A file without a header (a run of an older version
    resumed) is left as it was written."""
    if not has_header(metadata) or "status" not in fields:
        return {}
    return {"finished_at": None if fields["status"] == RunStatus.RUNNING else utc_now()}


def has_header(metadata: Mapping[str, Any]) -> bool:
    return isinstance(metadata.get("format_version"), int) and metadata.get("kind") in KINDS


def _utc(value: Any) -> str | None:
    """An ISO time (with its offset: converted to UTC; without one: as written) or epoch seconds, as ISO."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return value
    return when.astimezone(UTC).isoformat(timespec="seconds") if when.tzinfo else value


def read_header(metadata: Mapping[str, Any], guess_kind: Callable[[], RunKind], run_id: str = "") -> Header:
    """The run's header: as written, or derived from a file of format version 0 (`guess_kind` says its
    kind, called only then; `run_id`, its folder's name, stands in where the file names none)."""
    if has_header(metadata):
        return {"format_version": int(metadata["format_version"]), "kind": metadata["kind"],
                "run_id": str(metadata.get("run_id") or run_id), "status": str(RunStatus.read(metadata.get("status"))),
                "created_at": metadata.get("created_at"), "finished_at": metadata.get("finished_at"),
                "error": metadata.get("error")}
    kind = guess_kind()
    # v0: an eval's creation time is `date`, a GEPA run's `created_at` (ISO), a training manifest's
    # `created_at` (epoch seconds); only GEPA wrote when it finished (`completed_at`) and its error
    created = metadata.get("date") if kind == "eval" else metadata.get("created_at")
    error = metadata.get("error")
    return {"format_version": 0, "kind": kind, "run_id": str(metadata.get("run_id") or run_id),
            "status": str(RunStatus.read(metadata.get("status"))), "created_at": _utc(created),
            "finished_at": _utc(metadata.get("completed_at")), "error": error if isinstance(error, str) else None}
