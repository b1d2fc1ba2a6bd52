"""Errored rollouts in GEPA: counted and left out of every score, never scored 0.

A rollout that ended in an error (a model call that failed after its retries, an environment that raised)
says nothing about the prompt's quality, so it is not a reward of 0: a row's score is the mean reward of
its rollouts without an error, and a row none of whose rollouts was scored has no score (None). Parent
and child are compared on the minibatch rows both have a score on. A candidate more than half of whose
rollouts errored (on the minibatch, or on the validation set), and more than its parent's on the same
rows, is not accepted on the strength of the rest: what is left is too thin, and too likely picked by the
errors, to stand for the prompt. Errors the parent had as well are the rows' (a row every prompt fails
on), not the child's: those rows are left out of both and the child is judged on the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

# RowScore and mean_scored are the run record's (a candidate's val_mean); the engine imports them from here
from prime_cli.records.gepa_run import RowScore
from prime_cli.records.gepa_run import mean_scored as mean_scored
from prime_cli.results.summary import error_kind

MOSTLY = 0.5
"""A candidate with more than this share of its rollouts errored is not accepted."""


def entry_scored(entry: dict[str, Any]) -> bool:
    """A rollout-cache entry without an error (entries written before errors were left out carry the
    error only in their record)."""
    record = entry.get("record")
    return entry.get("reward") is not None and not error_kind(record.get("error") if isinstance(record, dict) else None)


def row_score(entries: Sequence[dict[str, Any]]) -> RowScore:
    rewards = [float(e["reward"]) for e in entries if entry_scored(e)]
    return sum(rewards) / len(rewards) if rewards else None


def errored(rows: Iterable[Sequence[dict[str, Any]]]) -> int:
    """Errored rollouts among rows of entries."""
    return sum(1 for entries in rows for e in entries if not entry_scored(e))


def mostly_errored(errored_rollouts: int, rollouts: int, parent_errored: int = 0) -> bool:
    """More than half of the rollouts errored, and more of them than the parent's on the same rows."""
    return rollouts > 0 and errored_rollouts > MOSTLY * rollouts and errored_rollouts > parent_errored


def both_scored(a: Sequence[RowScore], b: Sequence[RowScore]) -> list[int]:
    """Positions both score lists have a score on."""
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x is not None and y is not None]


def errored_note(errored_rollouts: int, rollouts: int, where: str, parent_errored: int = 0) -> str:
    """`errored on 5 of 8 minibatch rollouts (more than half; the parent on 1): not judged on the other 3`."""
    return (f"errored on {errored_rollouts} of {rollouts} {where} rollouts (more than half; the parent on "
            f"{parent_errored}): not judged on the other {rollouts - errored_rollouts}")


def format_score(score: float | None, digits: int = 4) -> str:
    return "-" if score is None else f"{score:.{digits}f}"


def errored_record(entries: Iterable[dict[str, Any]]) -> dict[str, int]:
    """metadata.json `errored_rollouts`: of the rollouts the run used (charged ones, and the test passes),
    how many errored and were left out, in all and by split."""
    record = {"left_out": 0, "rollouts": 0, "train": 0, "val": 0, "test": 0}
    for entry in entries:
        record["rollouts"] += 1
        if not entry_scored(entry):
            record["left_out"] += 1
            split = str(entry.get("split"))
            record[split] = record.get(split, 0) + 1
    return record
