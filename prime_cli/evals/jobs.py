"""Which (example, rollout) pairs a run still has to do, grouped by example."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import prime_cli.envs as vf


@dataclass
class EvalJobs:
    groups: list[tuple[dict[str, Any], list[int]]]  # (row, rollout indices to run)

    @property
    def total_rollouts(self) -> int:
        return sum(len(indices) for _, indices in self.groups)


def plan_jobs(
    env: vf.Environment,
    num_examples: int,
    rollouts_per_example: int,
    done_pairs: set[tuple[Any, int]],
    only_pairs: set[tuple[Any, int]] | None,
    seed: int | None = None,
) -> EvalJobs:
    """Groups for the missing pairs, or exactly `only_pairs` when it is given (--retry-errors)."""
    rows = env.get_eval_dataset(n=num_examples, seed=seed)
    groups = []
    for row in rows:
        example_id = row["example_id"]
        if only_pairs is not None:  # and those never run, as a run the error budget stopped has
            indices = [i for i in range(rollouts_per_example)
                       if (example_id, i) in only_pairs or (example_id, i) not in done_pairs]
        else:
            indices = [i for i in range(rollouts_per_example) if (example_id, i) not in done_pairs]
        if indices:
            groups.append((row, indices))
    return EvalJobs(groups=groups)
