"""Scoring candidates: concurrent rollouts, a cache so no rollout is paid for twice, and the budget.

A rollout is identified by (prompt hash, split, row, rollout index). Its result is kept in memory
and appended to rollouts.jsonl as soon as it is scored, so a resumed run never runs it again.
What a rollout costs is decided separately (`Ledger`): the engine charges the keys a step used,
in a fixed order, so the budget never depends on which concurrent task happened to finish first.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import prime_cli.envs as vf

from .reflection import rollout_record
from .rows import prompt_hash, with_system

logger = logging.getLogger("prime_cli.gepa")
FATAL_ERROR_TYPES = {"FatalEndpointError"}


class EndpointAborted(Exception):
    """The student endpoint cannot serve requests (bad key, unknown model, unreachable)."""


def rollout_key(phash: str, split: str, row: int, rollout: int) -> str:
    return f"{split}/{row}/{rollout}/{phash}"


class RolloutCache:
    """Results by key, mirrored to a JSONL file (when given) as they arrive."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.results: dict[str, dict[str, Any]] = {}
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:  # a line cut by a kill: that rollout is simply run again
                    continue
                if isinstance(entry, dict) and "key" in entry:
                    self.results[entry["key"]] = entry
        self._fh = path.open("a", encoding="utf-8") if path is not None else None

    def __contains__(self, key: str) -> bool:
        return key in self.results

    def get(self, key: str) -> dict[str, Any]:
        return self.results[key]

    def put(self, entry: dict[str, Any]) -> None:
        self.results[entry["key"]] = entry
        if self._fh is not None:
            self._fh.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class Ledger:
    """The budget: every distinct rollout key charged once, in the order the engine decides."""

    def __init__(self, charged: Iterable[str] = ()) -> None:
        self.charged: set[str] = set(charged)

    @property
    def used(self) -> int:
        return len(self.charged)

    def charge(self, keys: Iterable[str]) -> int:
        new = [k for k in dict.fromkeys(keys) if k not in self.charged]
        self.charged.update(new)
        return len(new)


class Evaluator:
    """Runs a prompt on rows of a split; at most `max_concurrent` rollouts in flight overall."""

    def __init__(self, env: vf.Environment, splits: dict[str, list[dict[str, Any]]], student: Any,
                 cache: RolloutCache, *, rollouts_per_example: int, max_concurrent: int,
                 sampling_args: dict[str, Any], state_columns: list[str],
                 on_rollout: Callable[[], None] | None = None) -> None:
        self.env = env
        self.splits = splits
        self.student = student
        self.cache = cache
        self.r = rollouts_per_example
        self.max_concurrent = max_concurrent
        self.sampling_args = sampling_args
        self.state_columns = state_columns
        self.on_rollout = on_rollout
        self._slots: asyncio.Semaphore | None = None
        self._running: dict[tuple[str, str, int], asyncio.Task] = {}

    def keys(self, prompt: str, split: str, rows: Iterable[int]) -> list[str]:
        phash = prompt_hash(prompt)
        return [rollout_key(phash, split, row, k) for row in rows for k in range(self.r)]

    async def row_results(self, prompt: str, split: str, rows: list[int]) -> list[list[dict[str, Any]]]:
        """For each row, its `r` rollout entries (from the cache, or run now)."""
        await asyncio.gather(*(self._ensure(prompt, split, row) for row in rows))
        phash = prompt_hash(prompt)
        return [[self.cache.get(rollout_key(phash, split, row, k)) for k in range(self.r)] for row in rows]

    async def scores(self, prompt: str, split: str, rows: list[int]) -> list[float]:
        """Mean reward per row."""
        results = await self.row_results(prompt, split, rows)
        return [sum(float(e["reward"]) for e in entries) / len(entries) for entries in results]

    async def _ensure(self, prompt: str, split: str, row: int) -> None:
        phash = prompt_hash(prompt)
        missing = [k for k in range(self.r) if rollout_key(phash, split, row, k) not in self.cache]
        if not missing:
            return
        group = (phash, split, row)
        task = self._running.get(group)
        if task is None:  # one task per (prompt, row): concurrent askers share it
            task = asyncio.ensure_future(self._run_group(prompt, phash, split, row, missing))
            self._running[group] = task
            task.add_done_callback(lambda _t: self._running.pop(group, None))
        await asyncio.shield(task)

    async def _run_group(self, prompt: str, phash: str, split: str, row: int, missing: list[int]) -> None:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrent)
        width = min(len(missing), self.max_concurrent)
        for _ in range(width):
            await self._slots.acquire()
        try:
            source = self.splits[split][row]
            task_row = {**source, "prompt": with_system(source["prompt"], prompt, self.env.message_type)}
            client, model = self.student.for_group(row)
            states = await self.env.run_group(client, model, task_row, n=len(missing),
                                              sampling_args=self.sampling_args)
        finally:
            for _ in range(width):
                self._slots.release()
        for index, state in zip(missing, states, strict=True):
            error = state.get("error") or {}
            if error.get("type") in FATAL_ERROR_TYPES:
                raise EndpointAborted(error.get("message") or "the model endpoint failed")
            self.cache.put({"key": rollout_key(phash, split, row, index), "split": split, "row": row,
                            "rollout": index, "prompt_hash": phash, "reward": float(state.get("reward") or 0.0),
                            "record": rollout_record(state, self.state_columns)})
            if self.on_rollout is not None:
                self.on_rollout()
