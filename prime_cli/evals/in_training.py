"""An eval run inside a training run: a trainer plugin evaluates its policy through the inference server
it trains with, and the result is an ordinary eval run (metadata.json, results.jsonl, eval.log) in the
folder the plugin names, so that `prime eval tui` and the eval readers open it like any other.

The environment's eval split, its own sampling defaults (`[tool.prime.eval]` max_tokens, temperature)
and the engine's scoring, saving and summary are those of `prime eval run`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import prime_cli.envs as vf
from prime_cli.runs.status import RunStatus

from .config import build_config
from .display import make_display
from .runner import run_eval


@dataclass
class PolicyEval:
    """What one environment's eval of the policy gave."""

    run_dir: Path
    status: RunStatus  # the eval run's status (completed, completed_with_errors, failed)
    reward_mean: float | None
    reward_std: float | None
    num_rollouts: int
    error_rate: float


class _OneClient:
    """The eval engine's client pool, reduced to the one client the plugin already holds (not closed here)."""

    def __init__(self, client: Any, model: str) -> None:
        self.client, self.model = client, model

    def for_group(self, group_index: int) -> tuple[Any, str]:  # noqa: ARG002 - one endpoint
        return self.client, self.model

    def retry_counts(self) -> Any:
        return getattr(self.client, "retry_counts", None)


async def evaluate_policy(env: vf.Environment, env_id: str, env_args: dict[str, Any], client: Any, model: str,
                          base_url: str, run_dir: Path, num_examples: int, rollouts_per_example: int,
                          max_concurrent: int = 32, seed: int | None = None) -> PolicyEval:
    """Evaluate `model` (the served policy) on `env`'s first `num_examples` eval rows (-1: all), saved in
    `run_dir` (a new folder). The engine's display goes nowhere: the caller reports one line."""
    config = build_config(f"[orchestrator.eval] {env_id}", env_id=env_id, env_args=env_args, model=model,
                          base_url=base_url, num_examples=num_examples, rollouts_per_example=rollouts_per_example,
                          max_concurrent=max(max_concurrent, rollouts_per_example), save_results=True, seed=seed,
                          display="plain")
    outcome = await run_eval(config, make_display("plain", stream=io.StringIO()), pool=_OneClient(client, model),
                             env=env, run_dir=run_dir)
    summary = outcome.summary
    return PolicyEval(run_dir=run_dir, status=outcome.status, reward_mean=summary.get("avg_reward"),
                      reward_std=summary.get("std_reward"), num_rollouts=int(summary.get("num_rollouts") or 0),
                      error_rate=float(summary.get("avg_error") or 0.0))
