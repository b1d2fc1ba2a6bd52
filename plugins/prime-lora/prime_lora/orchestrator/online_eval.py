"""Online evals ([orchestrator.eval]): the policy of step 0 (unless skipped), of every `interval`-th step
and of the last step is evaluated on the eval environments through the vLLM server and adapter name the
training samples from.

An eval runs as an asyncio task beside the sampling of the next batch, which uses the same weights; the
orchestrator waits for it only before it loads newer weights into the adapter (orchestrator/weights.py
calls `wait` then), so training stalls at most for the part of the eval's generation that the sampling
did not cover. Each environment's eval is an ordinary eval run in online_evals/step_N/<env>/, and one line per
eval goes to evals.jsonl: `{"step", "policy_step", "eval/time_s", "eval/<env>/reward/mean",
"eval/<env>/reward/std", "eval/<env>/num_rollouts", "eval/<env>/error_rate"}`. The trainer copies those
keys into metrics.jsonl (and W&B) and the launcher prints the line.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import (
    FINISHED,
    RLConfig,
    TrainingRunLayout,
    append_json_line,
    eval_summary_line,
    evaluate_policy,
    gather_or_cancel,
)


@dataclass
class EvalEnv:
    name: str  # its folder under online_evals/step_N and its key in the metrics
    id: str
    args: dict[str, Any]
    env: Any
    num_examples: int
    rollouts_per_example: int


def load_eval_envs(config: RLConfig) -> list[EvalEnv]:
    """[[orchestrator.eval.env]], or the training environments when none is listed."""
    from prime_cli.envs import load_environment

    section = config.orchestrator.eval
    entries = [(e.id, e.args, e.num_examples, e.rollouts_per_example) for e in section.env] or \
              [(e.id, e.args, None, None) for e in config.orchestrator.env]
    ids = [entry[0] for entry in entries]
    envs = []
    for index, (env_id, args, num_examples, rollouts) in enumerate(entries):
        name = env_id if ids.count(env_id) == 1 else f"{env_id}#{index}"
        envs.append(EvalEnv(name, env_id, dict(args), load_environment(env_id, **args),
                            section.num_examples if num_examples is None else num_examples,
                            section.rollouts_per_example if rollouts is None else rollouts))
    return envs


class OnlineEval:
    """The schedule of a run's evals and the one eval in flight."""

    def __init__(self, config: RLConfig, output_dir: Path, base_url: str, client: Any, start: int = 0,
                 envs: list[EvalEnv] | None = None):
        self.config, self.output_dir, self.base_url, self.client = config, output_dir, base_url, client
        self.pending = config.orchestrator.eval.steps(config.max_steps, start)
        self.envs = envs if envs is not None else load_eval_envs(config)
        self.task: asyncio.Task | None = None

    @property
    def next_step(self) -> int | None:
        """The next step due: the orchestrator loads no weights beyond it before evaluating it."""
        return self.pending[0] if self.pending else None

    def start_if_due(self, loaded: int | None) -> bool:
        """Start the eval of the loaded weights when a due step is reached. Named after the newest due step
        they cover (the weights of the due step itself were loaded unless they were already gone)."""
        if loaded is None or self.task is not None or not self.pending or loaded < self.pending[0]:
            return False
        step = max(s for s in self.pending if s <= loaded)
        self.pending = [s for s in self.pending if s > loaded]
        self.task = asyncio.create_task(self.evaluate(step, loaded))
        return True

    async def wait(self) -> None:
        """Until the eval in flight (if any) is written; its errors are raised here."""
        if self.task is not None:
            task, self.task = self.task, None
            await task

    async def finish(self, weights: Any) -> None:
        """After the last batch: evaluate the steps still due (the last one at least) as the trainer writes them."""
        await self.wait()
        while self.pending:
            await weights.ensure(self.pending[0], cap=self.pending[0], before_load=self.wait)
            self.start_if_due(weights.loaded)
            await self.wait()

    async def evaluate(self, step: int, policy_step: int) -> dict[str, Any]:
        layout = TrainingRunLayout(self.output_dir)
        started = time.perf_counter()

        async def one(spec: EvalEnv) -> Any:
            run_dir = layout.eval_run_dir(step, spec.name)
            shutil.rmtree(run_dir, ignore_errors=True)  # a resumed run evaluating this step again
            return await evaluate_policy(spec.env, spec.id, spec.args, self.client, self.config.policy_name,
                                         self.base_url, run_dir, spec.num_examples, spec.rollouts_per_example,
                                         max_concurrent=self.config.orchestrator.max_concurrent,
                                         seed=self.config.orchestrator_seed)

        results = await gather_or_cancel(*(one(spec) for spec in self.envs))
        line: dict[str, Any] = {"step": step, "policy_step": policy_step,
                                "eval/time_s": round(time.perf_counter() - started, 3)}
        for spec, result in zip(self.envs, results, strict=True):
            prefix = f"eval/{spec.name}"
            line.update({f"{prefix}/reward/mean": result.reward_mean, f"{prefix}/reward/std": result.reward_std,
                         f"{prefix}/num_rollouts": result.num_rollouts, f"{prefix}/error_rate": result.error_rate})
            if result.status not in FINISHED:
                print(f"warning: the eval of step {step} on {spec.name} ended {result.status}: see "
                      f"{result.run_dir}/eval.log", file=sys.stderr, flush=True)
        # only the orchestrator writes it (the trainer tails it); a torn last line of a run killed mid-write is
        # cut away first
        append_json_line(layout.evals_path, line)
        print(eval_summary_line(line), flush=True)
        return line
