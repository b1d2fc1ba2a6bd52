"""How the parts of a run started apart (`prime train CONFIG --part ...`) notice that another one is gone.

Each part's launcher rewrites heartbeats/<part>.json in the shared output_dir every few seconds (from a
thread, so that no wait of the launcher pauses it), and when it ends writes once more how it ended:
"done", or "stopped" and why. A part that reads "stopped" stops at once; one whose beat count has not
moved within the bound was killed, or its node went down or lost the shared folder. The silence is
measured on the reader's own clock, never by comparing times written on another machine, so clocks that
differ between nodes do no harm. (The folder's OS lock would not do: it holds on one machine only, and
on some network filesystems not at all.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import TrainingRunLayout, write_json_atomic

TIMEOUT_ENV = "PRIME_TRAIN_PART_TIMEOUT_S"  # how long a part may be silent before the others stop
DEFAULT_TIMEOUT_S = 30.0
BEATS_PER_TIMEOUT = 6  # a part writes its heartbeat this many times within its own bound
TRAINER = "trainer"  # node 0's heartbeat
ORCHESTRATOR = "orchestrator"


def seconds_from_env(name: str, default: float) -> float:
    """A number of seconds above 0 from the environment; ValueError (one line) when it is not one."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name}={raw!r}: give a number of seconds above 0 (default {default:g})")
    return value


def heartbeat_name(part: str, node_rank: int = 0) -> str:
    return f"trainer_node{node_rank}" if part == TRAINER and node_rank else part


def part_label(name: str) -> str:
    """`the trainer part (node 0)` for a heartbeat's name."""
    if name == TRAINER:
        return "the trainer part (node 0)"
    if name.startswith("trainer_node"):
        return f"the trainer part of node {name.removeprefix('trainer_node')}"
    return f"the {name} part"


def session_of(holder: dict[str, Any]) -> str:
    """The run session a heartbeat belongs to: node 0's hold on the folder's lock (parts.json names it)."""
    return f"{holder.get('pid')}@{holder.get('host')}:{holder.get('started_at')}"


@dataclass
class PartGone(Exception):
    """Another part of the run stopped, or fell silent past the bound."""

    label: str  # the part, e.g. "the trainer part (node 0)"
    why: str


class Heartbeat:
    """This part's heartbeats/<name>.json: a beat every `every_s` from a thread, then how it ended."""

    def __init__(self, path: Path, session: str, every_s: float):
        self.path, self.session, self.every_s = path, session, every_s
        self.beats = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.ended = False

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.write("running")
        self.thread = threading.Thread(target=self.run, name="heartbeat", daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop_event.wait(self.every_s):
            with contextlib.suppress(OSError):  # a filesystem hiccup: the next beat tries again
                self.write("running")

    def end(self, state: str, why: str = "") -> None:
        """The last write: "done", or "stopped" with why (once; later calls do nothing)."""
        if self.ended or self.thread is None:
            return
        self.ended = True
        self.stop_event.set()
        self.thread.join(timeout=5.0)
        with contextlib.suppress(OSError):
            self.write(state, why)

    def write(self, state: str, why: str = "") -> None:
        with self.lock:
            self.beats += 1
            write_json_atomic(self.path, {"session": self.session, "state": state, "why": why, "beat": self.beats,
                                          "every_s": self.every_s, "pid": os.getpid(),
                                          "host": socket.gethostname()})


class Watch:
    """Another part's heartbeat, read on this part's clock. `required`: that part is running already (node 0,
    which prepared the folder), so silence counts from now; else it counts from its first beat."""

    def __init__(self, path: Path, name: str, session: str, timeout_s: float, required: bool,
                 clock: Callable[[], float] = time.monotonic):
        self.path, self.name, self.session, self.timeout_s, self.clock = path, name, session, timeout_s, clock
        self.label = part_label(name)
        self.seen = required
        self.changed_at = clock()
        self.last: tuple[Any, Any] | None = None
        self.info: dict[str, Any] = {}
        self.done = False

    def read(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # not there yet, or a filesystem hiccup: the bound covers both
            return None
        return data if isinstance(data, dict) and data.get("session") == self.session else None

    def check(self) -> None:
        """Raise PartGone when the part said it stopped, or has been silent past the bound."""
        now = self.clock()
        data = self.read()
        if data is not None:
            key = (data.get("beat"), data.get("state"))
            if key != self.last:
                self.last, self.changed_at, self.seen, self.info = key, now, True, data
            if data.get("state") == "stopped":
                raise PartGone(self.label, f"it stopped ({data.get('why') or 'no reason given'})")
            if data.get("state") == "done":
                self.done = True
                return
        if not self.seen:
            return
        silent = now - self.changed_at
        if silent > self.bound:
            who = f"PID {self.info['pid']} on {self.info['host']}, " if "pid" in self.info else ""
            raise PartGone(self.label, f"no heartbeat for {silent:.0f} s ({who}{self.path}): it was killed, or its "
                                       "node is down or no longer sees the shared output_dir")

    @property
    def bound(self) -> float:
        """The reader's bound, and never under three of the writer's beats (its node may have a longer one)."""
        every = self.info.get("every_s")
        return max(self.timeout_s, 3 * every if isinstance(every, (int, float)) else 0)

    def describe(self) -> str:
        """How the part looks now, for a line saying what this part waits for."""
        if self.done:
            return f"{self.label} has finished"
        if not self.seen or not self.info:
            return f"{self.label} has not started yet"
        return f"{self.label} is running (heartbeat {self.clock() - self.changed_at:.0f} s ago)"


class Liveness:
    """This part's heartbeat and its watches over the parts it needs."""

    def __init__(self, heartbeat: Heartbeat, watches: list[Watch]):
        self.heartbeat, self.watches = heartbeat, watches

    @classmethod
    def for_part(cls, layout: TrainingRunLayout, part: str, node_rank: int, nodes: int, session: str,
                 timeout_s: float) -> Liveness:
        """Node 0 watches the orchestrator and the other trainer nodes once each has started; they watch node 0."""
        name = heartbeat_name(part, node_rank)
        if name == TRAINER:
            watched = [(ORCHESTRATOR, False)] + [(heartbeat_name(TRAINER, n), False) for n in range(1, nodes)]
        else:
            watched = [(TRAINER, True)]
        heartbeat = Heartbeat(layout.heartbeat_path(name), session, timeout_s / BEATS_PER_TIMEOUT)
        return cls(heartbeat, [Watch(layout.heartbeat_path(other), other, session, timeout_s, required)
                               for other, required in watched])

    def start(self) -> None:
        self.heartbeat.start()

    def check(self) -> None:
        for watch in self.watches:
            watch.check()

    def verdict(self, poll_s: float) -> PartGone | None:
        """Whether a part this one needs is gone, waiting up to the bound to know (its silence takes that long
        to count): for a failure here that another part's end may have caused."""
        deadline = time.monotonic() + max((watch.bound for watch in self.watches), default=0.0) + 2 * poll_s
        while True:
            try:
                self.check()
            except PartGone as gone:
                return gone
            if time.monotonic() > deadline:
                return None
            time.sleep(poll_s)

    def watch_of(self, name: str) -> Watch | None:
        return next((watch for watch in self.watches if watch.name == name), None)

    def end(self, state: str, why: str = "") -> None:
        self.heartbeat.end(state, why)


def clear_heartbeats(layout: TrainingRunLayout) -> None:
    """Node 0, before the other parts may start: no heartbeat of an earlier session is left to read."""
    shutil.rmtree(layout.heartbeat_path(TRAINER).parent, ignore_errors=True)
