"""[wandb.log_extras]: prime-rl's key for what W&B gets besides the scalars, read with its meaning.

Every `interval` steps (the steps divisible by it, as prime-rl counts) the orchestrator writes, beside the
step's batch, a few of the step's rollouts and the reward and advantage of all of them; the trainer, which
holds the W&B run, logs them as the table `samples` and the histograms `distributions/reward` and
`distributions/advantage`. prime-rl's `sample_ratio` (a fraction of the step's rollouts) is read too; ours,
`max_rows` and `max_chars`, keep the cost small whatever the ratio: a table never has more rows a step, nor
a text cell more characters.
"""

from __future__ import annotations

from pydantic import Field

from .config_nodes import Section

DEFAULT_INTERVAL = 10  # prime-rl's
DEFAULT_MAX_ROWS = 8
DEFAULT_MAX_CHARS = 2000


class LogExtrasConfig(Section):
    samples: bool = True  # the table of sampled rollouts
    distributions: bool = True  # histograms of the step's rewards and advantages
    interval: int = Field(DEFAULT_INTERVAL, ge=1)
    sample_ratio: float | None = Field(None, ge=0, le=1)  # of the step's rollouts, capped by max_rows
    max_rows: int = Field(DEFAULT_MAX_ROWS, ge=1, le=1000)
    max_chars: int = Field(DEFAULT_MAX_CHARS, ge=100, le=100_000)  # of each prompt, completion and error

    def due(self, step: int) -> bool:
        """Whether step `step` logs its extras."""
        return (self.samples or self.distributions) and step % self.interval == 0

    def rows(self, rollouts: int) -> int:
        """How many of a step's `rollouts` the table shows."""
        if not self.samples:
            return 0
        wanted = rollouts if self.sample_ratio is None else round(rollouts * self.sample_ratio)
        return min(wanted, self.max_rows, rollouts)

    def describe(self, max_steps: int, rows_are: str = "rollouts") -> str:
        """The plan's line: what is logged, and at which steps. `rows_are`: what a row is ("rollouts", or an SFT
        run's samples, which have no histograms)."""
        what = []
        if self.samples:
            share = f" ({self.sample_ratio:g} of the step's)" if self.sample_ratio is not None else ""
            what.append(f"table `samples` of up to {self.max_rows} {rows_are}{share}, texts cut at {self.max_chars} "
                        "characters")
        if self.distributions and rows_are == "rollouts":
            what.append("reward and advantage histograms")
        if not what:
            return "none (samples and distributions are both false)"
        steps = f"every {self.interval} steps" if self.interval > 1 else "every step"
        if max_steps < self.interval:
            steps += f": none in this run (max_steps {max_steps} < interval {self.interval})"
        return f"{'; '.join(what)}; {steps}"
