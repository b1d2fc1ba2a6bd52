"""Where the trainer's loop gets each step's batch: the files the orchestrator writes (FileBatches, the
production source) or batches held in memory (MemoryBatches: tests, or a driver without an orchestrator).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prime_cli.train.plugin_api import TrainingRunLayout, TrainingSample

from .batches import read_batch

POLL_S = 0.1
NOTICE_EVERY_S = 300.0


@dataclass
class Batch:
    samples: list[TrainingSample]
    stats: dict[str, Any] = field(default_factory=dict)  # the orchestrator's stats.json of the step
    waited_s: float = 0.0  # how long the trainer waited for it


class BatchSource(Protocol):
    def next_batch(self, step: int) -> Batch: ...


class BatchTimeout(TimeoutError):
    """No batch came within FileBatches' timeout."""


def say_now(line: str) -> None:
    print(line, flush=True)  # the trainer's stdout is logs/trainer.log


class FileBatches:
    """rollouts/step_N/batch.jsonl (and stats.json) of the run folder, polled every `poll_s` until the
    orchestrator has written them.

    How long to wait has no clean bound: the first batch comes after vLLM has started (minutes for a large
    model), a step takes as long as the slowest rollouts of the model and environment, and with
    `--part trainer` the orchestrator part may be started elsewhere much later. So by default the wait has
    no end, and says every `notice_every_s` which file it waits for; with `timeout_s` it raises
    BatchTimeout naming the file."""

    def __init__(self, output_dir: Path, timeout_s: float | None = None, notice_every_s: float = NOTICE_EVERY_S,
                 say: Callable[[str], None] | None = say_now, poll_s: float = POLL_S):
        self.layout = TrainingRunLayout(output_dir)
        self.timeout_s, self.notice_every_s, self.say, self.poll_s = timeout_s, notice_every_s, say, poll_s

    def next_batch(self, step: int) -> Batch:
        batch_path, stats_path = self.layout.batch_path(step), self.layout.batch_stats_path(step)
        started = time.perf_counter()
        next_notice = started + self.notice_every_s
        while not batch_path.exists():
            now = time.perf_counter()
            if self.timeout_s is not None and now - started >= self.timeout_s:
                raise BatchTimeout(f"no batch for step {step} after {self.timeout_s:g} s: {batch_path} was not "
                                   f"written (the orchestrator writes it; see its log)")
            if now >= next_notice and self.say is not None:
                self.say(f"waiting for {batch_path} ({now - started:.0f} s so far; the orchestrator writes it)")
                next_notice += self.notice_every_s
            time.sleep(self.poll_s)
        waited = time.perf_counter() - started
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        return Batch(read_batch(batch_path), stats, waited)


class MemoryBatches:
    """Batches given up front by step number (each a list of samples, or a Batch for stats too)."""

    def __init__(self, batches: Mapping[int, list[TrainingSample] | Batch]):
        self.batches = {step: batch if isinstance(batch, Batch) else Batch(list(batch))
                        for step, batch in batches.items()}

    def next_batch(self, step: int) -> Batch:
        if step not in self.batches:
            raise LookupError(f"no batch for step {step} in memory (steps held: {sorted(self.batches) or 'none'})")
        return self.batches[step]
