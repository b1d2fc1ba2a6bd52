"""Run folders written in the on-disk formats of DESIGN.md, with fixed names and dates so that
screenshots are the same on every machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_cli.records.eval_rows import to_json
from prime_cli.records.eval_run import EvalRunLayout
from prime_cli.results.summary import metadata_fields, summarize

SYSTEM = "Reverse the text you are given character by character. Reply inside <reversed_text> tags."
WORDS = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta", "iota kappa", "lambda mu"]


def eval_row(example_id: int, rollout_idx: int, reward: float, *, error: bool = False, tools: bool = False) -> dict[str, Any]:
    text = WORDS[example_id % len(WORDS)]
    reply = text[::-1] if reward >= 1 else text[: len(text) // 2][::-1]
    completion: list[dict[str, Any]] = [{"role": "assistant", "content": f"<reversed_text>{reply}</reversed_text>"}]
    if tools:
        completion = [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "reverse", "arguments": json.dumps({"text": text})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": text[::-1]},
            *completion,
        ]
    return {
        "example_id": example_id, "rollout_idx": rollout_idx,
        "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}],
        "completion": [] if error else completion,
        "answer": text[::-1], "task": "reverse-text", "info": {"source": "fixture", "n": example_id},
        "reward": None if error else reward,
        "metrics": {} if error else {"lcs_reward": reward, "format_reward": 1.0},
        "error": {"type": "ModelError", "message": "server returned 500 three times"} if error else None,
        "timing": {"generation_ms": 100.0 + example_id, "scoring_ms": 2.0, "total_ms": 102.0 + example_id},
        "is_completed": not error, "is_truncated": False,
        "stop_condition": "error" if error else "single_turn_done",
        "token_usage": {"prompt_tokens": 30, "completion_tokens": 5 + rollout_idx},
        "metrics_errors": [],
    }


def rows_for(n: int, r: int, rewards: Any = None, errors: set[tuple[int, int]] = frozenset(),
             tools: bool = False) -> list[dict[str, Any]]:
    """n examples x r rollouts; reward(example, rollout) from `rewards` (default: a fixed pattern)."""
    rewards = rewards or (lambda e, k: [1.0, 0.5, 0.0, 0.25][(e + k) % 4])
    return [eval_row(e, k, rewards(e, k), error=(e, k) in errors, tools=tools and e == 0)
            for e in range(n) for k in range(r)]


def write_eval_run(root: Path, rows: list[dict[str, Any]], *, env_id: str = "reverse-text", model: str = "m",
                   run_id: str = "20260101-120000-abc123", status: str = "completed",
                   date: str = "2026-01-01T12:00:00+00:00", truncated_tail: str = "") -> Path:
    """`root/outputs/evals/<env>--<model>/<run_id>/` with metadata.json and results.jsonl."""
    run_dir = root / "outputs" / "evals" / f"{EvalRunLayout.folder_name(env_id)}--{EvalRunLayout.folder_name(model)}" / run_id
    run_dir.mkdir(parents=True)
    examples = sorted({row["example_id"] for row in rows})
    meta: dict[str, Any] = {
        "env_id": env_id, "env_args": {}, "model": model, "base_url": "http://127.0.0.1:8000/v1",
        "num_examples": len(examples), "rollouts_per_example": max((row["rollout_idx"] for row in rows), default=-1) + 1,
        "sampling_args": {"temperature": 0.7}, "date": date, "time_ms": 1234.0, "version_info": {"prime_cli": "0.1.0"},
        "state_columns": [], "tools": [], "status": status,
    }
    if status != "running":
        meta.update(metadata_fields(summarize(rows)))
    (run_dir / "metadata.json").write_text(to_json(meta, indent=2) + "\n")
    with (run_dir / "results.jsonl").open("w") as fh:
        fh.writelines(to_json(row) + "\n" for row in rows)
        fh.write(truncated_tail)
    return run_dir


def append_rows(run_dir: Path, rows: list[dict[str, Any]]) -> None:
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.writelines(to_json(row) + "\n" for row in rows)


def finish_run(run_dir: Path, status: str = "completed") -> None:
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    meta = json.loads((run_dir / "metadata.json").read_text())
    meta.update(status=status, **metadata_fields(summarize(rows)))
    (run_dir / "metadata.json").write_text(to_json(meta, indent=2) + "\n")


SEED = "You reverse text.\nAnswer inside <reversed_text> tags."
CHILD = "You reverse text character by character.\nAnswer inside <reversed_text> tags.\nCheck the first letter."
GRANDCHILD = "You reverse text character by character.\nAnswer only inside <reversed_text> tags.\nCheck the first letter."


def write_gepa_run(root: Path, *, status: str = "completed", run_id: str = "20260102-090000-def456",
                   truncated_tail: bool = False) -> Path:
    """A three-candidate GEPA run (seed -> 1 -> 2, one rejected iteration) in the shared format."""
    run_dir = root / "outputs" / "gepa" / "reverse-text--m" / run_id
    run_dir.mkdir(parents=True)
    candidates = [
        {"candidate_idx": 0, "system_prompt": SEED, "parent_idx": None, "val_scores": [0.5, 0.0, 1.0, 0.5],
         "val_mean": 0.5, "iteration": 0, "discovered_at_calls": 4},
        {"candidate_idx": 1, "system_prompt": CHILD, "parent_idx": 0, "val_scores": [1.0, 0.5, 1.0, 0.5],
         "val_mean": 0.75, "iteration": 1, "discovered_at_calls": 14},
        {"candidate_idx": 2, "system_prompt": GRANDCHILD, "parent_idx": 1, "val_scores": [1.0, 0.5, 0.5, 1.0],
         "val_mean": 0.75, "iteration": 3, "discovered_at_calls": 30},
    ]
    iterations = [
        {"iteration": 1, "parent_idx": 0, "minibatch_rows": [3, 7, 1], "parent_minibatch_scores": [0.0, 0.5, 0.5],
         "child_minibatch_scores": [1.0, 0.5, 1.0], "accepted": True, "reason": "accepted", "child_idx": 1,
         "child_prompt": CHILD, "metric_calls": 14, "time_s": 3.2},
        {"iteration": 2, "parent_idx": 1, "minibatch_rows": [0, 2, 5], "parent_minibatch_scores": [1.0, 1.0, 1.0],
         "child_minibatch_scores": [], "accepted": False, "reason": "minibatch already perfect", "child_idx": None,
         "child_prompt": None, "metric_calls": 17, "time_s": 1.1},
        {"iteration": 3, "parent_idx": 1, "minibatch_rows": [4, 6, 8], "parent_minibatch_scores": [0.5, 0.0, 0.5],
         "child_minibatch_scores": [1.0, 0.5, 0.5], "accepted": True, "reason": "accepted", "child_idx": 2,
         "child_prompt": GRANDCHILD, "metric_calls": 30, "time_s": 2.9},
    ]
    frontier = []
    for row in range(4):
        best = max(c["val_scores"][row] for c in candidates)
        winners = [c for c in candidates if c["val_scores"][row] == best]
        frontier.append({"valset_row": row, "best_score": best, "num_best_prompts": len(winners),
                         "best_prompts": [{"candidate_idx": c["candidate_idx"], "system_prompt": c["system_prompt"],
                                           "score": best} for c in winners]})
    meta = {"run_id": run_id, "env_id": "reverse-text", "env_args": {}, "model": "m", "reflection_model": "big-m",
            "status": status, "created_at": "2026-01-02T09:00:00+00:00",
            "completed_at": None if status == "running" else "2026-01-02T09:05:00+00:00",
            "num_candidates": 3, "best_idx": 1, "best_score": 0.75, "total_metric_calls": 30, "max_calls": 40,
            "seed_val_score": 0.5, "seed_test_score": None, "best_test_score": None, "config": {"minibatch_size": 3}}
    (run_dir / "metadata.json").write_text(json.dumps(meta, indent=2))
    lines = [json.dumps(c) for c in candidates]
    body = "\n".join(lines) + "\n"
    if truncated_tail:
        body += '{"candidate_idx": 3, "system_prompt": "cut sh'
    (run_dir / "candidates.jsonl").write_text(body)
    (run_dir / "iterations.jsonl").write_text("".join(json.dumps(i) + "\n" for i in iterations))
    (run_dir / "pareto_frontier.jsonl").write_text("".join(json.dumps(f) + "\n" for f in frontier))
    if status != "running":
        (run_dir / "best_prompt.txt").write_text(CHILD)
        (run_dir / "system_prompt.txt").write_text(CHILD)
        (run_dir / "state.json").write_text(json.dumps({"iteration": 3}))
    return run_dir
