"""Run folders as other tools write them, built in the test: verifiers 0.4 (traces.jsonl +
configs/resolved/eval.json) and verifiers 0.3 (results.jsonl + metadata.json with their field names).

Rewards follow one pattern so tests can compute what a reader must show: example e, rollout k scores
`REWARDS[(e + k) % 3]`; rollout (1, 1) errored (no reward)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REWARDS = [1.0, 0.5, 0.0]
ERRORED = (1, 1)
WORDS = ["alpha beta", "gamma delta", "epsilon zeta"]


def reward_of(example: int, rollout: int) -> float | None:
    return None if (example, rollout) == ERRORED else REWARDS[(example + rollout) % 3]


def _v1_trace(example: int, rollout: int) -> dict[str, Any]:
    text, score = WORDS[example], reward_of(example, rollout)
    start = 1_760_000_000.0 + 10 * example + rollout
    errored = score is None
    nodes = [
        {"parent": None, "message": {"role": "system", "content": "Reverse the text."}, "sampled": False},
        {"parent": 0, "message": {"role": "user", "content": text}, "sampled": False},
    ]
    if not errored:
        nodes.append({"parent": 1, "message": {"role": "assistant", "content": text[::-1]}, "sampled": True})
    return {
        "version": 1, "id": f"trace-{example}-{rollout}", "verifiers": {"version": "0.4.0", "commit": None},
        "task": {"type": "ReverseTask", "data": {"example_id": example, "prompt": text, "answer": text[::-1],
                                                 "difficulty": "easy"},
                 "key": f"k{example}", "hash": f"h{example}"},
        "agent": {"config": {"model": "gpt-4.1-mini"}, "name": "agent", "trainable": True},
        "tools": [], "nodes": nodes,
        "calls": [] if errored else [{"node": 2, "model": "gpt-4.1-mini", "finish_reason": "stop",
                                     "usage": {"prompt_tokens": 20, "completion_tokens": 4 + rollout}}],
        "rewards": {"lcs": None if errored else {"score": score, "weight": 1.0}},
        "metrics": {"length": None if errored else float(len(text))},
        "info": {"judge": "none"}, "extra_usage": [],
        "is_completed": not errored, "ok": not errored,
        "stop_condition": "error" if errored else "done",
        "errors": [{"type": "ProviderError", "message": "502 from upstream"}] if errored else [],
        "timing": {"start": start, "agent": {"start": start, "end": start + 1.5},
                   "scoring": {"start": start + 1.5, "end": start + 1.75}},
    }


def write_verifiers_04_run(root: Path, env_id: str = "reverse-text", model: str = "gpt-4.1-mini",
                           examples: int = 3, rollouts: int = 2) -> Path:
    run_dir = root / f"{env_id}--{model}--default--a1b2c3"
    (run_dir / "configs" / "resolved").mkdir(parents=True)
    (run_dir / "logs").mkdir()
    (run_dir / "logs" / "eval.log").write_text("started\n")
    config = {"env": {"id": env_id, "args": {"split": "test"}}, "model": model,
              "client": {"base_url": "https://api.openai.com/v1"}, "sampling": {"temperature": 0.2},
              "num_tasks": examples, "num_rollouts": rollouts, "output_dir": "outputs"}
    (run_dir / "configs" / "resolved" / "eval.json").write_text(json.dumps(config, indent=2))
    with (run_dir / "traces.jsonl").open("w") as fh:
        for e in range(examples):
            for k in range(rollouts):
                fh.write(json.dumps(_v1_trace(e, k)) + "\n")
    return run_dir


def _v03_row(example: int, rollout: int) -> dict[str, Any]:
    text, score = WORDS[example], reward_of(example, rollout)
    errored = score is None
    row: dict[str, Any] = {
        "example_id": example, "prompt": [{"role": "user", "content": text}],
        "completion": [] if errored else [{"role": "assistant", "content": text[::-1]}],
        "answer": text[::-1], "task": "default", "info": {"difficulty": "easy"},
        "reward": 0.0 if errored else score,
        "timing": {"start_time": 1.0, "setup": {"start": 1.0, "end": 1.0, "duration": 0.0},
                   "generation": {"start": 1.0, "end": 2.0, "duration": 1.0},
                   "scoring": {"start": 2.0, "end": 2.5, "duration": 0.5},
                   "model": {"spans": [], "duration": 0.9}, "env": {"spans": [], "duration": 0.0},
                   "total": 1.5, "overhead": 0.1},
        "is_completed": not errored, "is_truncated": False, "stop_condition": None,
        "metrics": {"lcs_reward": 0.0 if errored else score},
        "tool_defs": None,
        "token_usage": {"input_tokens": 12.0, "output_tokens": 3.0},
        "lcs_reward": 0.0 if errored else score,  # their top-level copy of each metric
    }
    if errored:
        row["error"] = {"error": "ModelError", "message": "rate limited", "error_chain_repr": "ModelError()",
                        "error_chain_str": "ModelError: rate limited"}
        row["error_chain"] = "ModelError()"
        row["long_error_chain"] = "ModelError: rate limited"
    return row


def write_verifiers_03_run(root: Path, env_id: str = "reverse-text", model: str = "gpt-4.1-mini",
                           examples: int = 3, rollouts: int = 2) -> Path:
    run_dir = root / "evals" / f"{env_id}--{model}" / "4f2a9c"
    run_dir.mkdir(parents=True)
    with (run_dir / "results.jsonl").open("w") as fh:
        for e in range(examples):
            for k in range(rollouts):
                fh.write(json.dumps(_v03_row(e, k)) + "\n")
    meta = {"env_id": env_id, "env_args": {}, "model": model, "base_url": "https://api.openai.com/v1",
            "num_examples": examples, "rollouts_per_example": rollouts, "sampling_args": {"max_tokens": 64},
            "date": "2026-03-01 10:00:00", "time": 12.5, "avg_reward": 0.4, "avg_metrics": {"lcs_reward": 0.4},
            "avg_error": 1 / 6, "pass_at_k": {"1": 0.3}, "pass_all_k": {"1": 0.3}, "pass_threshold": 0.5,
            "usage": {"input_tokens": 12.0, "output_tokens": 3.0},
            "version_info": {"vf_version": "0.3.0", "vf_commit": None, "env_version": None, "env_commit": None},
            "state_columns": [], "path_to_save": str(run_dir), "tools": None}
    (run_dir / "metadata.json").write_text(json.dumps(meta, indent=2))
    return run_dir


def expected_rewards(examples: int = 3, rollouts: int = 2) -> list[float | None]:
    return [reward_of(e, k) for e in range(examples) for k in range(rollouts)]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes: to check a reader wrote nothing there."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
