"""The typed record of a GEPA run: its lines, its metadata and its file layout.

DESIGN.md, "GEPA runs on disk", is the contract; this module is that contract in code. The writer
(run_dir.py) and the reader (reader.py, the TUI) name every file through `GepaRunLayout` (it lives in
prime_cli/runs/layouts.py, so that the eval reader and the folder checks below the engines can name
GEPA files too) and pass lines as the TypedDicts below. Runs written by older versions may lack any key: read with `.get`.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from prime_cli.runs.layouts import GepaRunLayout
from prime_cli.runs.status import RunStatus

__all__ = ["FrontierPrompt", "FrontierRow", "GepaCandidate", "GepaIteration", "GepaMetadata", "GepaRunLayout"]


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
    """A GEPA run's metadata.json (rewritten as the search goes; unknown keys are kept)."""

    run_id: str
    status: RunStatus | str  # a RunStatus value (running, then completed, cancelled or failed); read back as a str
    created_at: str
    completed_at: str | None
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
    # rollouts the run used that errored and were left out of every score:
    # {"left_out", "rollouts", "train", "val", "test"} (prime_cli/gepa/scored.py)
    errored_rollouts: dict[str, int]
    intervals: dict[str, Any]  # 95% intervals of the seed's and best's validation scores, paired test difference
    config: dict[str, Any]
    cost: dict[str, Any]  # dollars by role (student, judge, reflection) and the prices used (results/cost.py)
    # where the last process's wall time went, in seconds (prime_cli/gepa/stages.py): startup_s, load_s,
    # local_server_s, setup_s, search_s, seed_validation_s (within search_s), test_s, finish_s, total_s
    stages: dict[str, float]
