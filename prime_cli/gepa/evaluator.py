"""Scoring candidates: concurrent rollouts, a cache so no rollout is paid for twice, and the budget.

A rollout is identified by (prompt hash, split, row, rollout index). Its result is kept in memory
and appended to rollouts.jsonl as soon as it is scored, so a resumed run never runs it again.
What a rollout costs is decided separately (`Ledger`): the engine charges the keys a step used,
in a fixed order, so the budget never depends on which concurrent task happened to finish first.

Rollout slots are shared by priority: minibatch rollouts (SEARCH: a few rollouts that a reflection
call waits for) come first, then VALIDATION passes (many rollouts; one round more or less), then
BACKGROUND work (the seed's held-out test pass), which only fills slots the search leaves idle,
e.g. while it waits for the reflection model. Priorities decide when a rollout runs, never what it
returns or what it costs.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import prime_cli.envs as vf
from prime_cli.envs.errors import is_fatal
from prime_cli.records.gepa_run import encode_line
from prime_cli.records.json_lines import JsonLinesAppender, read_json_lines

from .reflection import rollout_record
from .rows import prompt_hash, with_system
from .scored import RowScore, errored, row_score
from .state_columns import StateColumnCheck

logger = logging.getLogger("prime_cli.gepa")
SEARCH, VALIDATION, BACKGROUND = 0, 1, 2
"""Rollout priorities, most urgent first."""


class EndpointAborted(Exception):
    """The student endpoint cannot serve requests (bad key, unknown model, unreachable)."""


CONFIRM = "confirm"
"""The validation rows rolled out afresh under keys of their own, for the final pick (picking.py)."""


def rollout_key(phash: str, split: str, row: int, rollout: int) -> str:
    return f"{split}/{row}/{rollout}/{phash}"


class RolloutCache:
    """Results by key, mirrored to a JSONL file (when given) as they arrive."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.results: dict[str, dict[str, Any]] = {}
        self._file: JsonLinesAppender | None = None
        if path is not None:  # a line cut by a kill: that rollout is simply run again
            self.results.update((e["key"], e) for e in read_json_lines(path) if "key" in e)
            self._file = JsonLinesAppender(path, encode=encode_line)

    def __contains__(self, key: str) -> bool:
        return key in self.results

    def get(self, key: str) -> dict[str, Any]:
        return self.results[key]

    def put(self, entry: dict[str, Any]) -> None:
        self.results[entry["key"]] = entry
        if self._file is not None:
            self._file.append(entry)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


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


class _Ticket:
    """How urgent a group of rollouts is (SEARCH: the search waits for it); a later asker can raise it."""

    __slots__ = ("priority", "sent")

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self.sent = False  # it has its slots: its requests are (being) sent


class Slots:
    """At most `limit` rollouts in flight. Waiters are served by priority, then in arrival order; a
    group takes all the slots it needs at once (no group holds some while waiting for more).
    BACKGROUND work holds at most `background_limit` slots, so that the search's next small step
    (a minibatch) rarely waits for a background rollout to finish."""

    def __init__(self, limit: int, background_limit: int | None = None) -> None:
        self.limit = limit
        self.background_limit = limit if background_limit is None else max(1, min(limit, background_limit))
        self.free = limit
        self.background = 0
        self._waiters: list[tuple[_Ticket, int, int, asyncio.Future]] = []
        self._seq = itertools.count()

    def _grantable(self, ticket: _Ticket, n: int) -> bool:
        if self.free < n:
            return False
        return ticket.priority < BACKGROUND or self.background + n <= self.background_limit

    def _take(self, ticket: _Ticket, n: int) -> bool:
        self.free -= n
        background = ticket.priority >= BACKGROUND
        if background:
            self.background += n
        return background

    async def acquire(self, ticket: _Ticket, n: int) -> bool:
        """Take n slots; returns whether they count as background (pass it back to release)."""
        n = min(n, self.limit)
        if not self._waiters and self._grantable(ticket, n):
            return self._take(ticket, n)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = (ticket, next(self._seq), n, future)
        self._waiters.append(entry)
        self.wake()  # those waiting may be background work held back by its cap, not by a lack of slots
        try:
            return await future
        except asyncio.CancelledError:
            if entry in self._waiters:
                self._waiters.remove(entry)
            elif future.done() and not future.cancelled():  # granted, then cancelled before running
                self.release(n, future.result())
            self.wake()
            raise

    def release(self, n: int, background: bool) -> None:
        n = min(n, self.limit)
        self.free += n
        if background:
            self.background -= n
        self.wake()

    def wake(self) -> None:
        """Grant slots to waiters, most urgent first (call after a ticket's priority changed too)."""
        while self._waiters:
            entry = min(self._waiters, key=lambda e: (e[0].priority, e[1]))
            ticket, _, n, future = entry
            if future.done():  # cancelled: acquire() removes it
                self._waiters.remove(entry)
                continue
            if not self._grantable(ticket, n):
                return
            self._waiters.remove(entry)
            future.set_result(self._take(ticket, n))


class Evaluator:
    """Runs a prompt on rows of a split; at most `max_concurrent` rollouts in flight overall."""

    def __init__(self, env: vf.Environment, splits: dict[str, list[dict[str, Any]]], student: Any,
                 cache: RolloutCache, *, rollouts_per_example: int, max_concurrent: int,
                 sampling_args: dict[str, Any], state_columns: list[str],
                 on_rollout: Callable[[dict[str, Any]], None] | None = None, background_limit: int | None = None,
                 meter: Any = None, state_check: StateColumnCheck | None = None) -> None:
        self.env = env
        self.splits = {**splits, CONFIRM: splits["val"]} if "val" in splits else splits
        self.student = student
        self.cache = cache
        self.r = rollouts_per_example
        self.max_concurrent = max_concurrent
        self.sampling_args = sampling_args
        self.state_columns = state_columns
        self.on_rollout = on_rollout
        self.background_limit = background_limit
        self.meter = meter  # gepa/cost.py: the spend, and --max-cost checked before each group is sent
        self.state_check = state_check  # state_columns.py: columns no state has are said once
        self._slots: Slots | None = None
        self._running: dict[tuple[str, str, int], tuple[asyncio.Task, _Ticket]] = {}

    def keys(self, prompt: str, split: str, rows: Iterable[int]) -> list[str]:
        phash = prompt_hash(prompt)
        return [rollout_key(phash, split, row, k) for row in rows for k in range(self.r)]

    async def row_results(self, prompt: str, split: str, rows: list[int],
                          priority: int = SEARCH) -> list[list[dict[str, Any]]]:
        """For each row, its `r` rollout entries (from the cache, or run now)."""
        await asyncio.gather(*(self._ensure(prompt, split, row, priority) for row in rows))
        phash = prompt_hash(prompt)
        return [[self.cache.get(rollout_key(phash, split, row, k)) for k in range(self.r)] for row in rows]

    async def scores(self, prompt: str, split: str, rows: list[int], priority: int = SEARCH) -> list[RowScore]:
        """Mean reward per row over its rollouts without an error (None for a row whose rollouts all errored)."""
        results = await self.row_results(prompt, split, rows, priority)
        return [row_score(entries) for entries in results]

    def errored(self, prompt: str, split: str, rows: list[int]) -> int:
        """Errored rollouts of `prompt` on `rows` (run already: in the cache)."""
        phash = prompt_hash(prompt)
        return errored([[self.cache.get(rollout_key(phash, split, row, k)) for k in range(self.r)] for row in rows])

    async def cancel_queued(self) -> None:
        """Cancel the rollouts still waiting for a slot (nothing of them was sent): for when the run ends
        with background work or prefetches left. Rollouts already sent finish into the cache."""
        tasks = [task for task, ticket in self._running.values() if not ticket.sent and not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _slots_now(self) -> Slots:
        if self._slots is None:
            self._slots = Slots(self.max_concurrent, self.background_limit)
        return self._slots

    async def _ensure(self, prompt: str, split: str, row: int, priority: int = SEARCH) -> None:
        phash = prompt_hash(prompt)
        missing = [k for k in range(self.r) if rollout_key(phash, split, row, k) not in self.cache]
        if not missing:
            return
        group = (phash, split, row)
        running = self._running.get(group)
        if running is None:  # one task per (prompt, row): concurrent askers share it
            ticket = _Ticket(priority)
            task = asyncio.ensure_future(self._run_group(prompt, phash, split, row, missing, ticket))
            self._running[group] = (task, ticket)
            task.add_done_callback(lambda _t: self._running.pop(group, None))
        else:
            task, ticket = running
            if priority < ticket.priority:  # a more urgent asker joins: the group moves up the queue
                ticket.priority = priority
                self._slots_now().wake()
        await asyncio.shield(task)

    async def _run_group(self, prompt: str, phash: str, split: str, row: int, missing: list[int],
                         ticket: _Ticket | None = None) -> None:
        slots = self._slots_now()
        width = min(len(missing), self.max_concurrent)
        ticket = ticket or _Ticket(SEARCH)
        if self.meter is not None:
            await self.meter.admit(len(missing))
        try:
            await self._send_group(prompt, phash, split, row, missing, ticket, slots, width)
        finally:
            if self.meter is not None:
                self.meter.finished(len(missing))

    async def _send_group(self, prompt: str, phash: str, split: str, row: int, missing: list[int],
                          ticket: _Ticket, slots: Slots, width: int) -> None:
        background = await slots.acquire(ticket, width)
        ticket.sent = True
        try:
            source = self.splits[split][row]
            task_row = {**source, "prompt": with_system(source["prompt"], prompt, self.env.message_type)}
            client, model = self.student.for_group(row)
            states = await self.env.run_group(client, model, task_row, n=len(missing),
                                              sampling_args=self.sampling_args)
        finally:
            slots.release(width, background)
        for index, state in zip(missing, states, strict=True):
            error = state.get("error") or {}
            if is_fatal(error):
                raise EndpointAborted(error.get("message") or "the model endpoint failed")
            record = rollout_record(state, self.state_columns)
            if self.state_check is not None:
                self.state_check.see(state)
            entry = {"key": rollout_key(phash, split, row, index), "split": split, "row": row,
                     "rollout": index, "prompt_hash": phash, "reward": record["reward"],  # None: errored, left out
                     "record": record, "usage": state.get("usage"), "judge_usage": state.get("judge_usage")}
            self.cache.put(entry)
            if self.meter is not None:
                self.meter.add_rollout(entry)
            if self.on_rollout is not None:
                self.on_rollout(entry)
