"""Reader of GEPA run folders (`<root>/outputs/gepa/<env_id>--<model>/<run_id>/`).

The format is fixed in DESIGN.md ("GEPA runs on disk") and typed in records/gepa_run.py: metadata.json,
candidates.jsonl, iterations.jsonl, pareto_frontier.jsonl, best_prompt.txt. A run may still be being
written: files may be missing and the last line of a jsonl file may be cut short; both are tolerated.
Runs of older versions (and verifiers' GEPA folders: no candidates.jsonl, no status) load too.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_cli.records.gepa_run import (
    Candidate,
    FrontierRow,
    GepaIteration,
    GepaMetadata,
    GepaRunLayout,
)
from prime_cli.runs.metadata import RunDirError, read_metadata
from prime_cli.runs.status import RunStatus

logger = logging.getLogger(__name__)


def read_jsonl(path: Path) -> list[Any]:
    """The JSON objects of a jsonl file; a missing file is empty, an invalid line is skipped
    (with a warning unless it is the last one: a write in progress)."""
    if not path.is_file():
        return []
    rows: list[Any] = []
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif i != last:
            logger.warning("%s:%d: skipped an invalid line", path, i + 1)
    return rows


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
    """Everything in a GEPA run folder. Raises RunDirError when metadata.json is missing or bad."""
    run_dir = Path(run_dir)
    layout = GepaRunLayout(run_dir)
    metadata: GepaMetadata = read_metadata(run_dir)  # type: ignore[assignment]
    best_file = layout.best_prompt_path
    try:
        best_prompt = best_file.read_text(encoding="utf-8") if best_file.is_file() else None
    except OSError as exc:
        raise RunDirError(f"{best_file} cannot be read ({exc})") from None
    candidates = [Candidate.from_line(row) for row in read_jsonl(layout.candidates_path)]
    return GepaRun(
        path=run_dir,
        metadata=metadata,
        candidates=candidates,
        iterations=read_jsonl(layout.iterations_path),
        frontier=read_jsonl(layout.frontier_path),
        best_prompt=best_prompt,
    )
