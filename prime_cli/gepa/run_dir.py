"""The GEPA run directory (format shared with the TUI's reader; see DESIGN.md, "GEPA runs on disk").

`<root>/outputs/gepa/<env_id>--<model>/<run_id>/`: metadata.json, candidates.jsonl,
iterations.jsonl, pareto_frontier.jsonl, best_prompt.txt (= system_prompt.txt), state.json, and
rollouts.jsonl (the rollout cache). Whole-file rewrites go through a temporary file and a rename.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from prime_cli.envs.loader import module_name
from prime_cli.runs.metadata import RunDirError

from .pareto import best_candidate, row_fronts
from .state import Candidate, SearchState

STATE_FILE = "state.json"


def default_base(env_id: str, model: str, cwd: Path | None = None) -> Path:
    base = cwd or Path(".")
    env_folder = base / "environments" / module_name(env_id)
    root = env_folder if env_folder.is_dir() else base
    return root / "outputs" / "gepa" / f"{env_id.replace('/', '--')}--{model.replace('/', '--')}"


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def atomic_write(path: Path, text: str, sync: bool = False) -> None:
    """Readers never see a half-written file; `sync` also survives a power cut (used for the state)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str) + "\n"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a truncated last line
            if isinstance(row, dict):
                rows.append(row)
    return rows


class GepaRunDir:
    def __init__(self, path: Path, metadata: dict[str, Any]) -> None:
        self.path = path
        self.metadata = metadata

    @property
    def rollouts_path(self) -> Path:
        return self.path / "rollouts.jsonl"

    @classmethod
    def create(cls, path: Path, metadata: dict[str, Any]) -> GepaRunDir:
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, {**metadata, "run_id": path.name, "status": "running", "created_at": now_iso(),
                         "completed_at": None})
        run.write_metadata()
        for name in ("candidates.jsonl", "iterations.jsonl"):
            (path / name).touch()
        return run

    @classmethod
    def open(cls, path: Path) -> tuple[GepaRunDir, SearchState]:
        meta_path = path / "metadata.json"
        try:
            metadata = json.loads(meta_path.read_text(encoding="utf-8"))
            state = SearchState.from_json(json.loads((path / STATE_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f"{path} cannot be resumed ({type(exc).__name__}: {exc}); "
                              "pass a new -o/--run-dir to start afresh") from None
        run = cls(path, metadata)
        # lines written after the last saved state are dropped: the resumed run writes them again
        run.rewrite_jsonl("candidates.jsonl", [c.line() for c in state.candidates])
        run.rewrite_jsonl("iterations.jsonl", [row for row in read_jsonl(path / "iterations.jsonl")
                                               if int(row.get("iteration", 0)) <= state.last_committed])
        return run, state

    def write_metadata(self, **fields: Any) -> None:
        self.metadata.update(fields)
        atomic_write(self.path / "metadata.json", json.dumps(self.metadata, indent=2, ensure_ascii=False, default=str) + "\n")

    def rewrite_jsonl(self, name: str, rows: list[dict[str, Any]]) -> None:
        atomic_write(self.path / name, "".join(_line(r) for r in rows))

    def append(self, name: str, row: dict[str, Any]) -> None:
        with (self.path / name).open("a", encoding="utf-8") as fh:
            fh.write(_line(row))

    def save_candidate(self, candidate: Candidate) -> None:
        self.append("candidates.jsonl", candidate.line())

    def save_iteration(self, row: dict[str, Any]) -> None:
        self.append("iterations.jsonl", row)

    def save_start(self, state: SearchState, seed_prompt: str) -> None:
        """Before anything is scored: the seed is the best prompt, the frontier is empty, and the run can be
        resumed (a Ctrl-C or a kill during the seed's validation pass leaves a consistent folder)."""
        self.rewrite_jsonl("pareto_frontier.jsonl", [])
        for name in ("best_prompt.txt", "system_prompt.txt"):
            atomic_write(self.path / name, seed_prompt)
        atomic_write(self.path / STATE_FILE, json.dumps(state.to_json(set())) + "\n", sync=True)

    def save_progress(self, state: SearchState, charged: set[str], **metadata: Any) -> None:
        """Frontier, best prompt, metadata, then the resume state (last, so it never runs ahead)."""
        candidates = state.candidates
        fronts = row_fronts(state.val_scores)
        lines = []
        for row, front in enumerate(fronts):
            best = max(c.val_scores[row] for c in candidates)
            lines.append({"valset_row": row, "best_score": best, "num_best_prompts": len(front),
                          "best_prompts": [{"candidate_idx": i, "system_prompt": candidates[i].prompt,
                                            "score": candidates[i].val_scores[row]} for i in sorted(front)]})
        self.rewrite_jsonl("pareto_frontier.jsonl", lines)
        best = candidates[best_candidate(state.val_scores)]
        for name in ("best_prompt.txt", "system_prompt.txt"):
            atomic_write(self.path / name, best.prompt)
        self.write_metadata(num_candidates=len(candidates), best_idx=best.idx, best_score=best.val_mean,
                            total_metric_calls=len(charged), seed_val_score=candidates[0].val_mean, **metadata)
        atomic_write(self.path / STATE_FILE, json.dumps(state.to_json(charged)) + "\n", sync=True)
