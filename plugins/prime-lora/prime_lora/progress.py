"""The launcher's live view: one line per trained step, read from metrics.jsonl as it grows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# the prefix of the trainer's W&B lines (fallback to offline, the sync command), relayed to the terminal
WANDB_NOTICE = "W&B: "


def read_complete_lines(path: Path, offset: int) -> bytes:
    """The bytes of `path` from `offset` up to its last newline (a line still being written is left for
    the next read); empty while the file does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return b""
    return chunk[: chunk.rfind(b"\n") + 1]


class MetricsTail:
    """Yields the complete new lines of metrics.jsonl since the last call."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.rows: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        complete = read_complete_lines(self.path, self.offset)
        self.offset += len(complete)
        new = []
        for line in complete.decode(errors="replace").splitlines():
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.rows += new
        return new


class NoticeTail:
    """The trainer's lines meant for the user (starting with `prefix`), each with the last step the
    trainer had logged before it (its `step N: ...` line follows that step's metrics row; 0: none yet),
    so the launcher can print them in order among the step lines. Read from the log's size at creation:
    a resumed run's old lines are not shown again."""

    STEP_LINE = re.compile(rb"^step (\d+): ")

    def __init__(self, path: Path, prefix: str):
        self.path, self.prefix = path, prefix.encode()
        self.offset = path.stat().st_size if path.exists() else 0
        self.last_step = 0

    def poll(self) -> list[tuple[int, str]]:
        complete = read_complete_lines(self.path, self.offset)
        self.offset += len(complete)
        found = []
        for line in complete.splitlines():
            if step := self.STEP_LINE.match(line):
                self.last_step = int(step.group(1))
            elif line.startswith(self.prefix):
                found.append((self.last_step, line.decode(errors="replace")))
        return found


def _num(row: dict[str, Any], key: str, fmt: str, default: str = "-") -> str:
    value = row.get(key)
    return format(value, fmt) if isinstance(value, (int, float)) else default


def step_line(row: dict[str, Any], max_steps: int, orchestrator_log: str = "logs/orchestrator.log") -> str:
    """`step 3/30  reward 0.214 ± 0.081  batch 32 ...` for one metrics row."""
    parts = [f"step {row.get('step')}/{max_steps}",
             f"reward {_num(row, 'reward_mean', '.3f')} ± {_num(row, 'reward_std', '.3f')}"]
    per_env = row.get("per_env") or {}
    if len(per_env) > 1:
        parts.append(" ".join(f"{env} {_num(v, 'reward_mean', '.3f')}" for env, v in per_env.items()))
    parts.append(f"batch {row.get('effective_batch_size', '-')}")
    parts.append(f"kl {_num(row, 'mismatch_kl', '.2e')}")
    parts.append(f"masked {_num(row, 'masked_fraction', '.1%')}")
    parts.append(f"grad {_num(row, 'grad_norm', '.3f')}")
    timing = f"{_num(row, 'step_s', '.1f')} s (gen {_num(row, 'generation_s', '.1f')}, train {_num(row, 'train_s', '.1f')})"
    parts.append(timing)
    parts.append(f"{_num(row, 'tokens_per_s', '.0f')} tok/s")
    if row.get("effective_batch_size") == 0 and row.get("dropped_rollouts"):
        parts.append(f"all rollouts failed ({row['dropped_rollouts']} dropped): see {orchestrator_log}")
    elif row.get("skipped"):
        parts.append("SKIPPED (non-finite loss or gradient)")
    return "  ".join(parts)


def reward_curve(rows: list[dict[str, Any]]) -> str:
    """`0.14 0.15 0.19 ...` (the per-step reward means, for the final summary)."""
    return " ".join(_num(row, "reward_mean", ".3f") for row in rows)
