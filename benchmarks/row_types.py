"""How much a typed row costs to read: json.loads alone vs pydantic validation of each row.

    .venv/bin/python benchmarks/row_types.py [ROWS]

Prints seconds for ROWS (default 100,000) reverse-text-shaped results.jsonl lines: parse only, parse +
a pydantic model's `model_validate`, parse + a `TypeAdapter` over the `Rollout` TypedDict. The
choice in prime_cli/records/eval_run.py (TypedDict rows) rests on these figures.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from prime_cli.records.eval_run import Rollout


class RolloutModel(BaseModel):
    model_config = ConfigDict(extra="allow")
    example_id: Any = None
    rollout_idx: int = 0
    prompt: Any = None
    completion: Any = None
    answer: Any = None
    task: str | None = None
    info: dict[str, Any] | None = None
    reward: float | None = None
    metrics: dict[str, float | None] = {}
    error: Any = None
    timing: dict[str, float] = {}
    is_completed: bool = False
    is_truncated: bool = False
    stop_condition: str | None = None
    token_usage: dict[str, int] | None = None
    metrics_errors: list[Any] = []


def line(i: int) -> bytes:
    text = f"the quick brown fox {i} jumps over the lazy dog " * 3
    row = {"example_id": i // 4, "rollout_idx": i % 4, "task": "default", "answer": text[::-1],
           "prompt": [{"role": "system", "content": "Reverse the text."}, {"role": "user", "content": text}],
           "completion": [{"role": "assistant", "content": text[::-1]}], "info": {"source": "bench"},
           "reward": (i % 7) / 7, "metrics": {"lcs_reward": (i % 5) / 5}, "error": None,
           "timing": {"generation_ms": 120.0 + i % 9, "scoring_ms": 1.5, "total_ms": 122.0},
           "is_completed": True, "is_truncated": False, "stop_condition": "max_turns",
           "token_usage": {"prompt_tokens": 40, "completion_tokens": 30}, "metrics_errors": []}
    return json.dumps(row).encode() + b"\n"


def timed(label: str, fn) -> None:
    start = time.perf_counter()
    fn()
    print(f"{label:<38} {time.perf_counter() - start:6.2f} s")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    lines = [line(i) for i in range(n)]
    adapter = TypeAdapter(Rollout)
    print(f"{n} rows")
    timed("json.loads (TypedDict rows)", lambda: [json.loads(x) for x in lines])
    timed("json.loads + BaseModel.model_validate", lambda: [RolloutModel.model_validate(json.loads(x)) for x in lines])
    timed("BaseModel.model_validate_json", lambda: [RolloutModel.model_validate_json(x) for x in lines])
    timed("json.loads + TypeAdapter(Rollout)", lambda: [adapter.validate_python(json.loads(x)) for x in lines])


if __name__ == "__main__":
    main()
