"""What a part started apart (`--part`) waits for, said in its terminal every 30 s while it waits: another
part's output lands in the shared output_dir, and that part's terminal may be on another machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prime_cli.train.plugin_api import TrainingRunLayout

NOTICE_ENV = "PRIME_TRAIN_WAIT_NOTICE_S"  # how often a waiting part says so
DEFAULT_NOTICE_S = 30.0


def batch_awaited(layout: TrainingRunLayout, next_step: int, max_steps: int) -> str | None:
    """A trainer part's wait: the orchestrator's batch of the step it trains next, until it is written."""
    if next_step > max_steps or layout.batch_path(next_step).exists():
        return None
    return f"the orchestrator's batch for step {next_step} ({layout.batch_path(next_step)})"


def weights_awaited(layout: TrainingRunLayout, start: int, max_steps: int, max_async_level: int) -> str | None:
    """The orchestrator part's wait: the trainer's weights that its next batch may be sampled with (batch N
    with weights no older than step N - 1 - max_async_level)."""
    written = [step for step in layout.steps(layout.ROLLOUTS) if step > start and layout.batch_path(step).exists()]
    batch = max(written, default=start) + 1
    if batch > max_steps:
        return None
    needed = max(0, batch - 1 - max_async_level)
    weights = layout.weight_steps()
    if weights and weights[-1] >= needed:
        return None
    return f"the trainer's weights of step {needed} ({layout.weights_dir(needed)}) to sample batch {batch}"


class WaitNotice:
    """One line every `every_s` while the same wait goes on: what, since when, and how the awaited part is."""

    def __init__(self, every_s: float, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.every_s, self.say, self.clock = every_s, say, clock
        self.what: str | None = None
        self.since = self.next_at = 0.0
        self.since_wall = 0.0

    def update(self, what: str | None, how: Callable[[], str] | None = None) -> None:
        now = self.clock()
        if what != self.what:
            self.what, self.since, self.next_at, self.since_wall = what, now, now + self.every_s, time.time()
            return
        if what is None or now < self.next_at:
            return
        self.next_at = now + self.every_s
        since = time.strftime("%H:%M:%S", time.localtime(self.since_wall))
        self.say(f"waiting for {what} since {since} ({now - self.since:.0f} s)" + (f"; {how()}" if how else ""))
