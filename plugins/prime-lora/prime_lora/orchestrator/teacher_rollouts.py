"""SFT on a teacher's rollouts ([orchestrator.teacher_rollout_model]): each step, the teacher plays examples of
the environments (groups of rollouts_per_example, scored by the environments' rubrics), and its rollouts with
reward >= min_reward (with best_per_example: each example's best of those) become SFT samples: the prompt and
the teacher's messages, tokenized with the student's chat template, the loss on the assistant turns.

Rounds of examples are played until batch_size samples; samples beyond it wait for the next step (they are
kept in the step's progress, with the sampler's state, so a resumed run trains on exactly what a straight run
would). Errored rollouts (the teacher's server or the environment failed, a reward function raised) are
counted by kind as in RL and stop the run past orchestrator.max_error_rate; rollouts below min_reward (or not
their example's best) and rollouts that cannot become a sample (longer than seq_len, ...) are counted too.

The teacher is a server of its own, the run's vLLM serving the teacher adapter as "teacher", or the run's base
model. The run's vLLM, when started, serves the policy for the online evals; without it (a teacher elsewhere
and no evals) batches are paced by the trainer's weights alone, as SFT on a data set is.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import (
    EndpointSpec,
    OpenAIChatClient,
    RLConfig,
    RowProblem,
    TrainingRunLayout,
    TrainingSample,
    describe_bad,
    gather_or_cancel,
    rollout_row,
)

from .loop import StepFault, checkpoint_path, load_env_rows, sampling_args, write_batch
from .online_eval import OnlineEval
from .rollout_errors import ErrorLog, RolloutError, rate_fault, scoring_errors, state_error
from .sampler import EnvRows, EnvSampler
from .sft_loop import eval_pool, load_tokenizer, pace
from .sft_tokens import BadRow, conversation_sample
from .teacher import teacher_endpoint
from .wandb_extras import due, sft_extras, write_extras
from .weights import PolicyWeights

MAX_ROUNDS = 10  # rounds of examples per step before a short batch is written


@dataclass
class Played:
    """What one example's group of teacher rollouts gave."""

    samples: list[TrainingSample] = field(default_factory=list)
    rollouts: int = 0
    rewards: list[float] = field(default_factory=list)  # of the rollouts scored (errored ones are not)
    errors: dict[str, int] = field(default_factory=dict)  # kind -> errored rollouts
    filtered: int = 0  # below min_reward, or not the example's best
    bad: dict[str, int] = field(default_factory=dict)  # reason -> kept rollouts that could not become a sample


def chosen(rewards: list[float], min_reward: float | None, best_per_example: bool) -> list[int]:
    """The indexes of the rollouts kept: reward >= min_reward (None: all), and only the first best one."""
    kept = [i for i, r in enumerate(rewards) if min_reward is None or r >= min_reward]
    if best_per_example and kept:
        best = max(rewards[i] for i in kept)
        kept = [next(i for i in kept if rewards[i] == best)]
    return kept


async def play_example(entry: EnvRows, row: dict[str, Any], client: Any, model: str, config: RLConfig,
                       tokenizer: Any, log: ErrorLog) -> Played:
    teacher = config.orchestrator.teacher_rollout_model
    states = await entry.env.run_group(client, model, row, n=config.orchestrator.rollouts_per_example,
                                       sampling_args=sampling_args(config))
    played = Played(rollouts=len(states))
    scored: list[tuple[dict[str, Any], float]] = []
    for state in states:
        failure: RolloutError | None = state_error(state, frozenset())  # the teacher's own errors are errors here
        if failure is None:
            reward_failures, metric_failures = scoring_errors(state)
            for each in [*reward_failures, *metric_failures]:
                log.add(each)
            failure = reward_failures[0] if reward_failures else None
        else:
            log.add(failure)
        if failure is not None:
            played.errors[failure.kind] = played.errors.get(failure.kind, 0) + 1
            continue
        scored.append((state, float(state.get("reward") or 0.0)))
    played.rewards = [reward for _, reward in scored]
    keep = chosen(played.rewards, teacher.min_reward, teacher.best_per_example)
    played.filtered = len(scored) - len(keep)
    tools = getattr(entry.env, "oai_tools", None) or None
    for index in keep:
        state, reward = scored[index]
        origin = f"{entry.name} example {row.get('example_id')} teacher rollout {index}"
        try:
            conversation = rollout_row({"prompt": state.get("prompt"), "completion": state.get("completion"),
                                        "is_truncated": state.get("is_truncated")}, tools, origin)
            sample = conversation_sample(tokenizer, conversation, config.seq_len, env=entry.name)
        except (BadRow, RowProblem) as problem:
            played.bad[problem.reason] = played.bad.get(problem.reason, 0) + 1
            continue
        played.samples.append({**sample, "reward": reward, "example_id": row.get("example_id"), "policy_step": 0})
    return played


@dataclass
class TeacherBatch:
    samples: list[TrainingSample] = field(default_factory=list)
    carried: int = 0  # samples from the last step's surplus
    examples: int = 0
    played: list[Played] = field(default_factory=list)
    fault: str | None = None

    @property
    def rollouts(self) -> int:
        return sum(p.rollouts for p in self.played)

    @property
    def errored(self) -> int:
        return sum(sum(p.errors.values()) for p in self.played)

    @property
    def bad(self) -> dict[str, int]:
        """Kept rollouts that could not become a sample, by reason."""
        return dict(sum((Counter(p.bad) for p in self.played), Counter()))

    def stats(self) -> dict[str, Any]:
        rewards = [r for p in self.played for r in p.rewards]
        errors = sum((Counter(p.errors) for p in self.played), Counter())
        sampled = self.rollouts or 1
        return {"reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
                "teacher_examples": self.examples, "rollouts_sampled": self.rollouts,
                "teacher_kept": sum(len(p.samples) for p in self.played),
                "teacher_filtered": sum(p.filtered for p in self.played),
                "teacher_bad_rows": sum(self.bad.values()),
                "teacher_carried": self.carried, "errored_rollouts": self.errored,
                "error_rate": self.errored / sampled,
                **{f"error_rate/{kind}": count / sampled for kind, count in sorted(errors.items())}}


async def collect_teacher_batch(sampler: EnvSampler, client: Any, model: str, config: RLConfig, tokenizer: Any,
                                surplus: list[TrainingSample], log: ErrorLog, step: int = 0) -> TeacherBatch:
    """batch_size samples: the surplus first, then rounds of examples played by the teacher (the later rounds
    sized by the samples an example gave so far). What is beyond batch_size stays in `surplus`."""
    orch = config.orchestrator
    needed = orch.batch_size
    batch = TeacherBatch(samples=surplus[:needed], carried=min(len(surplus), needed))
    del surplus[:needed]
    per_example = 1 if orch.teacher_rollout_model.best_per_example else orch.rollouts_per_example
    for _ in range(MAX_ROUNDS):
        missing = needed - len(batch.samples)
        if missing <= 0:
            break
        gained = sum(len(p.samples) for p in batch.played)
        if batch.examples:
            per_example = max(gained / batch.examples, 1 / (4 * orch.rollouts_per_example))
        draws = [sampler.next() for _ in range(min(math.ceil(missing / per_example), 4 * needed))]
        played = await gather_or_cancel(*(play_example(entry, row, client, model, config, tokenizer, log)
                                          for entry, row in draws))
        batch.examples += len(draws)
        batch.played.extend(played)
        for each in played:
            batch.samples.extend(each.samples)
        batch.fault = rate_fault(step, batch.errored, batch.rollouts, 0, orch.max_error_rate, log.first_fault,
                                 log.before)
        if batch.fault:
            return batch
        if all(sum(p.errors.values()) == p.rollouts for p in played):
            break  # every rollout of the round errored: more rounds would too
    surplus.extend(batch.samples[needed:])
    batch.samples = batch.samples[:needed]
    return batch


def empty_teacher_fault(step: int, batch: TeacherBatch, log: ErrorLog, config: RLConfig) -> str:
    stats = batch.stats()
    teacher = config.orchestrator.teacher_rollout_model
    cause = (f"no teacher rollout to train on at step {step}: of {batch.rollouts} rollouts of {batch.examples} "
             f"examples, {stats['errored_rollouts']} errored, {stats['teacher_filtered']} were filtered out")
    if teacher.min_reward is not None:
        cause += f" (min_reward {teacher.min_reward:g}{', best_per_example' if teacher.best_per_example else ''})"
    if stats["teacher_bad_rows"]:
        cause += f", {stats['teacher_bad_rows']} could not become samples (seq_len {config.seq_len})"
    first = log.first_fault or log.first
    return cause + (f"; first error: {first.one_line()}" if first else "")


def teacher_client(config: RLConfig, base_urls: list[str] | None) -> tuple[Any, str]:
    """The chat client that plays the environments as the teacher, and the model name it sends."""
    teacher = config.orchestrator.teacher_rollout_model
    if not teacher.client.base_url and not base_urls:
        raise StepFault("the teacher is served by the run's vLLM: start the orchestrator with --base-url")
    endpoint = teacher_endpoint(teacher, config, base_urls[0] if base_urls else "")
    spec = EndpointSpec("teacher", endpoint.model, endpoint.base_url, endpoint.key_var)
    return OpenAIChatClient(spec, max_concurrent=config.orchestrator.max_concurrent), endpoint.model


async def run_teacher_sft(config: RLConfig, output_dir: Path, base_urls: list[str] | None,
                          resume_step: int | None) -> int:
    client, model = teacher_client(config, base_urls)
    pool = eval_pool(config, base_urls) if config.orchestrator.eval is not None and base_urls else None
    try:
        await teacher_sft_steps(config, output_dir, client, model, pool, resume_step or 0, load_tokenizer(config))
    finally:
        await client.aclose()
        if pool is not None:
            await pool.aclose()
    return 0


async def teacher_sft_steps(config: RLConfig, output_dir: Path, client: Any, model: str, pool: Any, start: int,
                            tokenizer: Any) -> None:
    orch = config.orchestrator
    sampler = EnvSampler(load_env_rows(config), seed=config.orchestrator_seed)
    surplus: list[TrainingSample] = []
    if start:
        saved = json.loads(checkpoint_path(output_dir, start).read_text())
        sampler.restore(saved["sampler"])
        surplus = list(saved.get("teacher_surplus", []))
    weights = PolicyWeights(output_dir, pool, config.policy_name) if pool is not None else None
    online = OnlineEval(config, output_dir, pool.primary.url, pool.primary.eval_client, start) if pool else None
    errors = ErrorLog()
    for step in range(start + 1, config.max_steps + 1):
        step_started = time.perf_counter()
        oldest_allowed = max(0, step - 1 - orch.max_async_level)
        waited, policy_step = await pace(output_dir, oldest_allowed, weights, online)
        errors.begin_step(step)
        generation_started = time.perf_counter()
        batch = await collect_teacher_batch(sampler, client, model, config, tokenizer, surplus, errors, step)
        generation_s = time.perf_counter() - generation_started
        if batch.fault:
            raise StepFault(batch.fault)
        if not batch.samples:
            raise StepFault(empty_teacher_fault(step, batch, errors, config))
        errors.end_step(batch.errored, batch.rollouts)
        if len(batch.samples) < orch.batch_size:
            print(f"warning: step {step} has {len(batch.samples)} of {orch.batch_size} samples: the teacher's "
                  f"rollouts of {batch.examples} examples gave no more in {MAX_ROUNDS} rounds",
                  file=sys.stderr, flush=True)
        samples = batch.samples
        stats = {"step": step, "policy_step": policy_step, "samples": len(samples),
                 "effective_batch_size": len(samples), "loss_tokens": sum(sum(s["loss_mask"]) for s in samples),
                 "tokens": sum(len(s["input_ids"]) for s in samples), **batch.stats(),
                 "generation_s": generation_s, "wait_weights_s": waited}
        if due(config, step):
            write_extras(output_dir, step, sft_extras(step, samples, tokenizer, config))
        write_batch(TrainingRunLayout(output_dir).rollouts_dir(step), samples, stats,
                    {"step": step, "sampler": sampler.state(), "teacher_surplus": surplus})
        errored = f", {stats['errored_rollouts']} errored" if stats["errored_rollouts"] else ""
        bad = f", {describe_bad(batch.bad).replace('skipped', 'not usable')}" if batch.bad else ""
        print(f"step {step}: {len(samples)} samples from the teacher's rollouts (reward {stats['reward_mean']:.3f}; "
              f"of {batch.rollouts} rollouts of {batch.examples} examples: {stats['teacher_kept']} kept, "
              f"{stats['teacher_filtered']} filtered out{bad}{errored}; {batch.carried} carried over), "
              f"generation {generation_s:.1f}s, waited {waited:.1f}s for weights (policy step {policy_step}), "
              f"total {time.perf_counter() - step_started:.1f}s", flush=True)
    if online is not None:
        await online.finish(weights)
