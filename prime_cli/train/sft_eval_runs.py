"""SFT rows from saved eval runs (`prime eval run -s`): each rollout's prompt (with the environment's system
prompt) and completion, with the run's tools. Errored rollouts are skipped and counted; `min_reward` keeps
rollouts whose reward is at least it; `best_per_example` keeps each example's best kept rollout (the first
of equals). Rows are read with the results readers' rules (DESIGN.md, "Eval results on disk").
"""

from __future__ import annotations

import math
from typing import Any

from prime_cli.results.eval_reader import ResultsIndex, RunEntry

from .config_sft import SftSource
from .sft_rows import UNREADABLE, Conversation, RowProblem, SourceRows, rollout_row, tools_of

ERRORED = "errored rollout"


def _reward(row: dict[str, Any]) -> float | None:
    reward = row.get("reward")
    return float(reward) if isinstance(reward, (int, float)) and math.isfinite(reward) else None


def _rows(entry: RunEntry) -> list[dict[str, Any]]:
    index = ResultsIndex(entry.path)
    try:
        index.scan()
        return list(index.iter_rows())
    finally:
        index.close()


def _count(bad: dict[str, int], reason: str) -> None:
    bad[reason] = bad.get(reason, 0) + 1


def read_eval_runs(runs: list[RunEntry], source: SftSource, name: str) -> SourceRows:
    bad: dict[str, int] = {}
    kept: list[tuple[tuple[str, str], float | None, Conversation]] = []
    total = below = 0
    for entry in runs:
        try:
            tools = tools_of(entry.metadata.get("tools"))
        except RowProblem:
            tools = None
        for row in _rows(entry):
            total += 1
            error = row.get("error")
            if error:
                _count(bad, UNREADABLE if isinstance(error, dict) and error.get("type") == "InvalidLine" else ERRORED)
                continue
            origin = f"{entry.env_id}/{entry.run_id} example {row.get('example_id')} rollout {row.get('rollout_idx')}"
            try:
                conversation = rollout_row(row, tools, origin)
            except RowProblem as problem:
                _count(bad, problem.reason)
                continue
            reward = _reward(row)
            if source.min_reward is not None and (reward is None or reward < source.min_reward):
                below += 1
                continue
            kept.append(((entry.env_id, repr(row.get("example_id"))), reward, conversation))
    chosen = kept
    if source.best_per_example:
        best: dict[tuple[str, str], int] = {}
        for position, (key, reward, _) in enumerate(kept):
            if key not in best or (reward if reward is not None else -math.inf) > (
                    kept[best[key]][1] if kept[best[key]][1] is not None else -math.inf):
                best[key] = position
        chosen = [kept[i] for i in sorted(best.values())]
    conversations = [conversation for _, _, conversation in chosen]
    if source.max_rows is not None:
        conversations = conversations[: source.max_rows]
    envs = sorted({entry.env_id for entry in runs})
    parts = [f"{len(runs)} eval run{'s' if len(runs) != 1 else ''} of {', '.join(envs)}", f"{total} rollouts"]
    if source.min_reward is not None:
        parts.append(f"{below} below min_reward {source.min_reward:g}")
    if source.best_per_example:
        parts.append(f"{len(kept) - len(chosen)} not their example's best")
    return SourceRows(conversations, bad, f"{name} ({', '.join(parts)})")
