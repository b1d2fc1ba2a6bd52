"""The GEPA run directory (format shared with the TUI's reader; see DESIGN.md, "GEPA runs on disk").

`<root>/outputs/gepa/<env_id>--<model>/<run_id>/`: metadata.json, candidates.jsonl,
iterations.jsonl, pareto_frontier.jsonl, best_prompt.txt (= system_prompt.txt), state.json, and
rollouts.jsonl (the rollout cache). Whole-file rewrites go through a temporary file and a rename.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from prime_cli.records.gepa_run import (
    FrontierRow,
    GepaCandidate,
    GepaIteration,
    GepaMetadata,
    GepaRunLayout,
    encode_line,
)
from prime_cli.records.header import header_update, new_header, with_header
from prime_cli.records.json_lines import append_json_line, read_json_lines
from prime_cli.runs.atomic import write_json_atomic, write_jsonl_atomic, write_text_atomic
from prime_cli.runs.metadata import RunDirError

from .pareto import row_fronts
from .state import Candidate, SearchState

STATE_FILE = GepaRunLayout.STATE
default_base = GepaRunLayout.runs_folder


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


class GepaRunDir:
    def __init__(self, path: Path, metadata: GepaMetadata) -> None:
        self.path = path
        self.layout = GepaRunLayout(path)
        self.metadata = metadata
        self._fronted: list[Any] | None = None  # the validation scores the frontier and best prompt show

    @property
    def rollouts_path(self) -> Path:
        return self.layout.rollouts_path

    @classmethod
    def create(cls, path: Path, metadata: GepaMetadata) -> GepaRunDir:
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, {**with_header(new_header("gepa", path.name), metadata),  # type: ignore[typeddict-item]
                         "completed_at": None})
        run.write_metadata()
        run.layout.candidates_path.touch()
        run.layout.iterations_path.touch()
        return run

    @classmethod
    def open(cls, path: Path) -> tuple[GepaRunDir, SearchState]:
        layout = GepaRunLayout(path)
        try:
            metadata = json.loads(layout.metadata_path.read_text(encoding="utf-8"))
            state = SearchState.from_json(json.loads(layout.state_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f"{path} cannot be resumed ({type(exc).__name__}: {exc}); "
                              "pass a new -o/--run-dir to start afresh") from None
        run = cls(path, metadata)
        # lines written after the last saved state are dropped: the resumed run writes them again
        write_jsonl_atomic(layout.candidates_path, [c.line() for c in state.candidates])
        write_jsonl_atomic(layout.iterations_path, [row for row in read_json_lines(layout.iterations_path)
                                                    if int(row.get("iteration", 0)) <= state.last_committed])
        return run, state

    def write_metadata(self, **fields: Any) -> None:
        self.metadata.update(fields, **header_update(self.metadata, fields))  # type: ignore[typeddict-item]
        write_json_atomic(self.layout.metadata_path, self.metadata, indent=2)

    def _append(self, path: Path, row: GepaCandidate | GepaIteration) -> None:
        append_json_line(path, row, encode=encode_line)

    def save_candidate(self, candidate: Candidate) -> None:
        self._append(self.layout.candidates_path, candidate.line())

    def save_iteration(self, row: GepaIteration) -> None:
        self._append(self.layout.iterations_path, row)

    def _write_best_prompt(self, prompt: str) -> None:
        for name in (GepaRunLayout.BEST_PROMPT, GepaRunLayout.SYSTEM_PROMPT):
            write_text_atomic(self.layout / name, prompt)

    def save_start(self, state: SearchState, seed_prompt: str) -> None:
        """Before anything is scored: the seed is the best prompt, the frontier is empty, and the run can be
        resumed (a Ctrl-C or a kill during the seed's validation pass leaves a consistent folder)."""
        write_jsonl_atomic(self.layout.frontier_path, [])
        self._write_best_prompt(seed_prompt)
        write_text_atomic(self.layout.state_path, json.dumps(state.to_json(set())) + "\n", durable=True)

    def save_progress(self, state: SearchState, charged: set[str], **metadata: Any) -> None:
        """Frontier, best prompt, metadata, then the resume state (last, so it never runs ahead). The frontier
        and best prompt are rewritten only when a validation score or the best changed (most commits accept
        nothing)."""
        candidates = state.candidates
        best = state.best()
        scores = (best.idx, [(list(c.val_scores), c.val_rows_run) for c in candidates])  # the pick changes the best alone
        if scores != self._fronted:
            self._write_frontier(candidates)
            self._write_best_prompt(best.prompt)
            self._fronted = scores
        self.write_metadata(num_candidates=len(candidates), best_idx=best.idx, best_score=state.score_of(best),
                            total_metric_calls=len(charged), seed_val_score=candidates[0].val_mean, **metadata)
        write_text_atomic(self.layout.state_path, json.dumps(state.to_json(charged)) + "\n", durable=True)

    def _write_frontier(self, candidates: list[Candidate]) -> None:
        lines: list[FrontierRow] = []
        for row, front in enumerate(row_fronts([c.val_scores for c in candidates])):
            # a row no candidate was scored on (all errored): an empty front
            best = max((candidates[i].val_scores[row] for i in front), default=None)
            lines.append({"valset_row": row, "best_score": best, "num_best_prompts": len(front),
                          "best_prompts": [{"candidate_idx": i, "system_prompt": candidates[i].prompt,
                                            "score": candidates[i].val_scores[row]} for i in sorted(front)]})
        write_jsonl_atomic(self.layout.frontier_path, lines)
