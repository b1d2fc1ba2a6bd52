"""The record of a GEPA run (`<root>/outputs/gepa/<env_id>--<model>/<run_id>/`): its lines, its
metadata, its candidates and its reader.

DESIGN.md, "GEPA runs on disk", is the contract; this module is that contract in code. The writer
(gepa/run_dir.py) and the reader (`read_gepa_run`, for the TUI) name every file through `GepaRunLayout`
(it lives in prime_cli/runs/layouts.py, so that the folder checks below the records can name GEPA files
too), pass lines as the TypedDicts below, and hold candidates as the one `Candidate`. A run may still be
being written: files may be missing and the last line of a JSON-lines file may be torn (left out, by
records.json_lines' rule; a bad line elsewhere is an error naming file:line). Runs written by older
versions (and verifiers' GEPA folders: no candidates.jsonl, no status) load too: read with `.get`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from prime_cli.runs import json_lines
from prime_cli.runs.layouts import GepaRunLayout
from prime_cli.runs.metadata import RunDirError, read_metadata
from prime_cli.runs.status import RunStatus

from .json_lines import read_json_lines

__all__ = ["Candidate", "FrontierPrompt", "FrontierRow", "GepaCandidate", "GepaIteration", "GepaMetadata", "GepaRun",
           "GepaRunLayout", "RowScore", "encode_line", "is_gepa_run", "mean_scored", "proposal_origin", "read_gepa_run"]

RowScore = float | None
"""A row's mean reward over its scored rollouts; None when every rollout of the row errored
(gepa/scored.py: errored rollouts are left out, never scored 0)."""


def mean_scored(scores: Iterable[RowScore]) -> float | None:
    """Mean over the rows with a score; None when none has one."""
    values = [s for s in scores if s is not None]
    return sum(values) / len(values) if values else None


def encode_line(row: Any) -> str:
    """A line of a GEPA run's JSON-lines files (candidates, iterations, the rollout cache): a value JSON
    cannot encode is written as its str()."""
    return json_lines.dumps(row, default=str)


class GepaCandidate(TypedDict, total=False):
    """One candidates.jsonl line: a system prompt the search kept, with its validation scores."""

    candidate_idx: int  # 0 is the seed prompt
    system_prompt: str
    parent_idx: int | None
    val_scores: list[float | None]  # one per validation row; None when every rollout of the row errored
    val_mean: float | None  # over the rows with a score
    val_errored: int  # validation rollouts that errored: counted and left out, never scored 0
    iteration: int  # the iteration that proposed it (0 for the seed)
    discovered_at_calls: int | None  # metric calls spent when it was accepted
    # validation rows it was run on: all of them, or fewer for a late winner validated on the rows the budget
    # left paid for, or for a child below its parent on the first half of them (the first rows of one seeded
    # order; the others are None in val_scores; gepa/validation.py, gepa/validating.py)
    val_rows_run: int


class FrontierPrompt(TypedDict):
    candidate_idx: int
    system_prompt: str
    score: float


class FrontierRow(TypedDict, total=False):
    """One pareto_frontier.jsonl line: the best candidates on one validation row."""

    valset_row: int
    best_score: float | None  # None: no candidate was scored on the row (every rollout errored)
    num_best_prompts: int
    best_prompts: list[FrontierPrompt]


class GepaIteration(TypedDict, total=False):
    """One iterations.jsonl line: a proposal and what became of it."""

    iteration: int
    kind: str  # "reflect", "edit" (the instructions with the evidence against each) or "merge" (gepa/planner.py)
    other_idx: int | None  # a merge: the candidate whose instructions joined the parent's
    parent_idx: int
    minibatch_rows: list[int]  # the fresh minibatch, then train rows the parent was already scored on
    parent_minibatch_scores: list[float | None]  # None: every rollout of that row errored
    child_minibatch_scores: list[float | None]
    parent_minibatch_errored: int  # minibatch rollouts that errored (left out; the two compared on rows both scored)
    child_minibatch_errored: int
    accepted: bool
    reason: str
    child_idx: int | None
    child_prompt: str | None
    child_val_rows_run: int | None  # the accepted child's validation rows (GepaCandidate.val_rows_run)
    child_val_cut: str | None  # why fewer than all: "budget" (what was left) or "race" (below its parent on half)
    metric_calls: int
    time_s: float
    reflection_reply: str  # what the reflection model answered (absent when it was not called)
    reflection_truncated: bool  # that answer hit the reflection's max_tokens


class GepaMetadata(TypedDict, total=False):
    """A GEPA run's metadata.json (rewritten as the search goes; unknown keys are kept). It starts with
    the header (records/header.py); files of format version 0 have only run_id, status, created_at, error."""

    format_version: int
    kind: str  # "gepa"
    run_id: str
    status: RunStatus | str  # a RunStatus value (running, then completed, cancelled or failed); read back as a str
    created_at: str  # ISO 8601; UTC since format version 1
    finished_at: str | None  # UTC, set with the status that ends the run
    completed_at: str | None  # local time with its offset, as format version 0 wrote it
    env_id: str
    env_args: dict[str, Any]
    model: str
    reflection_model: str
    num_candidates: int
    best_idx: int | None
    best_score: float | None
    seed_val_score: float | None
    seed_test_score: float | None
    best_test_score: float | None
    test_metric_calls: int
    total_metric_calls: int
    max_calls: int
    speculation: dict[str, Any]
    error: str | None
    stop_reason: str | None  # why a completed run stopped before its budget (None: the budget ran out)
    # how the best was chosen (prime_cli/gepa/picking.py): method, leader_by_validation, best, duels (each:
    # leader, challenger, rows_disagreeing, rows_rerun, challenger_lead, won), score_rollouts (the validation
    # rollouts best_score rests on), fresh_rollouts (the best's re-rolls the choice also rests on)
    pick: dict[str, Any] | None
    # rollouts the run used that errored and were left out of every score:
    # {"left_out", "rollouts", "train", "val", "test"} (prime_cli/gepa/scored.py)
    errored_rollouts: dict[str, int]
    intervals: dict[str, Any]  # 95% intervals of the seed's and best's validation scores, paired test difference
    config: dict[str, Any]
    cost: dict[str, Any]  # dollars by role (student, judge, reflection) and the prices used (results/cost.py)
    # where the last process's wall time went, in seconds (prime_cli/gepa/stages.py): startup_s, load_s,
    # local_server_s, setup_s, search_s, seed_validation_s (within search_s), test_s, finish_s, total_s
    stages: dict[str, float]


@dataclass
class Candidate:
    """A system prompt the search kept, with its validation scores: the engine's search state holds
    these (state.json stores their fields), candidates.jsonl stores each as one `GepaCandidate` line
    (`line`), and the reader builds them back from those lines (`from_line`)."""

    idx: int
    prompt: str
    parent: int | None
    val_scores: list[RowScore]  # one per validation row
    iteration: int  # the iteration that proposed it (0 for the seed)
    discovered_at_calls: int | None  # metric calls spent when it was accepted; None in lines of early versions
    val_errored: int = 0  # its validation rollouts that errored: counted, left out of its scores
    val_rows_run: int | None = None  # validation rows it was run on (fewer: a partial validation,
    # gepa/validation.py; the others are None in val_scores); None in states saved before: every row

    @property
    def val_mean(self) -> float | None:
        """Mean over the validation rows it was scored on; None when it was scored on none."""
        return mean_scored(self.val_scores)

    def line(self) -> GepaCandidate:
        """Its candidates.jsonl line."""
        return {"candidate_idx": self.idx, "system_prompt": self.prompt, "parent_idx": self.parent,
                "val_scores": self.val_scores, "val_mean": self.val_mean, "val_errored": self.val_errored,
                "val_rows_run": len(self.val_scores) if self.val_rows_run is None else self.val_rows_run,
                "iteration": self.iteration, "discovered_at_calls": self.discovered_at_calls}

    @classmethod
    def from_line(cls, row: GepaCandidate) -> Candidate:
        """The candidate of a candidates.jsonl line; a line of an older version lacks keys (defaults)."""
        parent = row.get("parent_idx")
        return cls(
            idx=int(row.get("candidate_idx", 0)),
            prompt=str(row.get("system_prompt") or ""),
            parent=int(parent) if isinstance(parent, int) else None,
            val_scores=[float(s) if isinstance(s, (int, float)) else None for s in row.get("val_scores") or []],
            iteration=int(row.get("iteration") or 0),
            discovered_at_calls=row.get("discovered_at_calls"),
            val_errored=int(row.get("val_errored") or 0),
            val_rows_run=row["val_rows_run"] if isinstance(row.get("val_rows_run"), int) else None,
        )


@dataclass
class GepaRun:
    path: Path
    metadata: GepaMetadata
    candidates: list[Candidate] = field(default_factory=list)
    iterations: list[GepaIteration] = field(default_factory=list)
    frontier: list[FrontierRow] = field(default_factory=list)
    best_prompt: str | None = None

    @property
    def status(self) -> RunStatus | str:
        return RunStatus.read(self.metadata.get("status"))

    def candidate(self, idx: int) -> Candidate | None:
        for cand in self.candidates:
            if cand.idx == idx:
                return cand
        return None

    @property
    def best_idx(self) -> int | None:
        best = self.metadata.get("best_idx")
        if isinstance(best, int):
            return best
        scored = [c for c in self.candidates if c.val_mean is not None]
        return max(scored, key=lambda c: c.val_mean).idx if scored else None

    def lineage(self, idx: int) -> list[int]:
        """Candidate indices from the seed down to `idx` (a broken or cyclic chain stops early)."""
        chain: list[int] = []
        current: int | None = idx
        while current is not None and current not in chain:
            chain.append(current)
            cand = self.candidate(current)
            current = cand.parent if cand else None
        return chain[::-1]

    def frontier_counts(self) -> dict[int, int]:
        """How many validation rows each candidate is among the best on."""
        counts: dict[int, int] = {}
        for row in self.frontier:
            for prompt in row.get("best_prompts") or []:
                idx = prompt.get("candidate_idx") if isinstance(prompt, dict) else None
                if isinstance(idx, int):
                    counts[idx] = counts.get(idx, 0) + 1
        return counts

    def best_prompt_text(self) -> str:
        if self.best_prompt is not None:
            return self.best_prompt
        best = self.best_idx
        cand = self.candidate(best) if best is not None else None
        return cand.prompt if cand else ""


def proposal_origin(line: dict[str, Any]) -> str:
    """Where an iteration's child came from: `parent 3`, `edit of 3` (the edit step) or `merge of 3 + 5`."""
    kind, parent = line.get("kind") or "reflect", line.get("parent_idx")
    if kind == "edit":
        return f"edit of {parent}"
    if kind == "merge":
        return f"merge of {parent} + {line.get('other_idx')}"
    return f"parent {parent}"


def is_gepa_run(run_dir: Path) -> bool:
    return GepaRunLayout(Path(run_dir)).looks_like_run()


def read_gepa_run(run_dir: Path) -> GepaRun:
    """Everything in a GEPA run folder. Raises RunDirError when metadata.json is missing or bad, or a
    JSON-lines file has a bad line other than a torn last one (JsonLinesError)."""
    run_dir = Path(run_dir)
    layout = GepaRunLayout(run_dir)
    metadata: GepaMetadata = read_metadata(run_dir)  # type: ignore[assignment]
    best_file = layout.best_prompt_path
    try:
        best_prompt = best_file.read_text(encoding="utf-8") if best_file.is_file() else None
    except OSError as exc:
        raise RunDirError(f"{best_file} cannot be read ({exc})") from None
    candidates = [Candidate.from_line(row) for row in read_json_lines(layout.candidates_path)]
    return GepaRun(
        path=run_dir,
        metadata=metadata,
        candidates=candidates,
        iterations=read_json_lines(layout.iterations_path),
        frontier=read_json_lines(layout.frontier_path),
        best_prompt=best_prompt,
    )
