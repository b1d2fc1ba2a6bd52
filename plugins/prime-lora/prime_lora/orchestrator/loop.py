"""The orchestrator's loop: for each step, sample groups from the environments on the current policy,
keep the groups that carry signal, and hand the batch to the trainer as files.

Batch N may be generated with weights no older than step N-1-max_async_level; the orchestrator waits
for the trainer (and hot-loads the adapter into vLLM) when it runs ahead.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from prime_cli.envs.errors import is_fatal
from prime_cli.train.plugin_api import (
    RLConfig,
    TrainingRunLayout,
    TrainingSample,
    gather_or_cancel,
    write_json_atomic,
    write_jsonl_atomic,
)

from .batching import BatchStats, Group, difficulty, group_samples, has_signal, keep_group
from .buffer import SurplusGroups
from .online_eval import OnlineEval
from .rollout_errors import (
    ErrorLog,
    RolloutError,
    empty_batch_fault,
    no_tokens_error,
    rate_fault,
    scoring_errors,
    state_error,
)
from .sampler import EnvRows, EnvSampler
from .samples import NoTokens, policy_error_types, rollout_samples
from .servers import InferencePool, InferenceServerHandle, ServerDown
from .teacher import TEACHER_ERROR_KIND, TeacherClient, TeacherError, teacher_endpoint
from .wandb_extras import RolloutRecord, due, extras_config, rl_extras, write_extras
from .weights import PolicyWeights

MAX_ROUNDS = 10  # rounds of sampling per step before groups without signal are let through


class EndpointDown(Exception):
    """The inference server stopped answering: nothing later can succeed."""


class StepFault(Exception):
    """A step failed past the threshold, or left no trainable sample: the run stops (message: the cause)."""


def write_batch(step_dir: Path, samples: list[TrainingSample], stats: dict[str, Any],
                progress: dict[str, Any] | None = None) -> None:
    """stats.json and the orchestrator's progress (orchestrator.json) first, then batch.jsonl by rename: the
    trainer treats batch.jsonl as 'complete', and copies the progress into its checkpoint of the step."""
    step_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(step_dir / TrainingRunLayout.BATCH_STATS, stats)
    if progress is not None:
        write_json_atomic(step_dir / TrainingRunLayout.ORCHESTRATOR_CHECKPOINT, progress)
    write_jsonl_atomic(step_dir / TrainingRunLayout.BATCH, samples)


def load_env_rows(config: RLConfig) -> list[EnvRows]:
    from prime_cli.envs import load_environment

    entries = []
    for index, entry in enumerate(config.orchestrator.env):
        env = load_environment(entry.id, **entry.args)
        rows = env.get_dataset()
        for row_index, row in enumerate(rows):
            if row.get("example_id") is None:
                row["example_id"] = row_index
        name = entry.id if [e.id for e in config.orchestrator.env].count(entry.id) == 1 else f"{entry.id}#{index}"
        entries.append(EnvRows(name=name, env=env, rows=rows, ratio=entry.ratio))
    return entries


def sampling_args(config: RLConfig) -> dict[str, Any]:
    """Every parameter that shapes the sampling distribution, sent explicitly: vLLM fills what a request
    leaves out from the model's generation_config.json (Qwen3: top_k=20), which the trainer would not see."""
    sampling = config.orchestrator.sampling
    args: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
                            "min_p": sampling.min_p, "repetition_penalty": sampling.repetition_penalty}
    if sampling.max_tokens is not None:
        args["max_tokens"] = sampling.max_tokens
    return args


async def sample_group(entry: EnvRows, row: dict[str, Any], client: Any, config: RLConfig,
                       policy_step: int = 0, errors: ErrorLog | None = None, teacher: TeacherClient | None = None) -> Group:
    """The example's group of rollouts: rewards and samples of the rollouts that count (see
    rollout_errors for which leave the group), each error counted by kind and logged once. With a
    teacher (on-policy distillation) the kept rollouts' samples get its log-probs; a rollout the teacher
    could not score is an errored rollout (TeacherError)."""
    states = await entry.env.run_group(client, config.policy_name, row, n=config.orchestrator.rollouts_per_example,
                                       sampling_args=sampling_args(config))
    group = Group(env=entry.name, example_id=row.get("example_id"), rewards=[], samples=[], policy_step=policy_step,
                  rollouts=len(states))
    policy_errors = policy_error_types(entry.env)
    log = errors if errors is not None else ErrorLog()
    outcomes: list[tuple[dict[str, Any], RolloutError | None, list[TrainingSample]]] = []
    for state in states:
        error = state.get("error") or {}
        if is_fatal(error):
            raise EndpointDown(error.get("message", "the inference server failed"))
        group.completion_tokens += int((state.get("usage") or {}).get("completion_tokens", 0))
        group.scoring_s = max(group.scoring_s, float((state.get("timing") or {}).get("scoring_ms", 0.0)) / 1000)
        group.truncated += int(bool(state.get("is_truncated")))
        failure = state_error(state, policy_errors)
        samples: list[TrainingSample] = []
        if failure is None:
            try:
                samples = rollout_samples(state, config.seq_len, config.orchestrator.trajectory_strategy)
            except NoTokens as exc:
                failure = no_tokens_error(state, str(exc))
        if failure is None:
            reward_failures, metric_failures = scoring_errors(state)
            for each in [*reward_failures, *metric_failures]:
                log.add(each)
            group.metric_errors += int(bool(metric_failures))
            failure = reward_failures[0] if reward_failures else None
        else:
            log.add(failure)
        outcomes.append((state, failure, samples))
    if teacher is not None:
        outcomes = await gather_or_cancel(*(teacher_scored(teacher, outcome, log) for outcome in outcomes))
    logs_rollouts = extras_config(config) is not None  # [wandb.log_extras]: the texts a table may show
    for state, failure, samples in outcomes:
        if failure is not None:
            group.errors[failure.kind] = group.errors.get(failure.kind, 0) + 1
        if failure is not None and failure.policy:  # reward 0 in the baseline, nothing to train
            group.policy_errors += 1
            group.rewards.append(0.0)
            group.samples.append([])
        elif failure is not None:
            group.dropped_rollouts += 1
        else:
            group.rewards.append(float(state.get("reward") or 0.0))
            group.samples.append(samples)
        if logs_rollouts:
            counted = failure is None or failure.policy
            group.rollout_log.append(RolloutRecord(
                state.get("prompt"), state.get("completion"), group.rewards[-1] if counted else None,
                len(group.rewards) - 1 if counted else None, None if failure is None else failure.one_line()))
    if len(group.rewards) < 2:  # a lone rollout has no baseline to compare with
        group.rewards, group.samples = [], []
    return group


async def teacher_scored(teacher: TeacherClient, outcome: tuple[dict[str, Any], RolloutError | None,
                                                                  list[TrainingSample]],
                         log: ErrorLog) -> tuple[dict[str, Any], RolloutError | None, list[TrainingSample]]:
    """A kept rollout's samples with the teacher's log-probs, or the rollout errored by the teacher's failure."""
    state, failure, samples = outcome
    if failure is not None or not samples:
        return outcome
    try:
        return state, None, [await teacher.score(sample) for sample in samples]
    except TeacherError as exc:
        error = RolloutError(TEACHER_ERROR_KIND, f"{TEACHER_ERROR_KIND}: {exc}")
        log.add(error)
        return state, error, []


def as_pool(servers: InferencePool | Any) -> InferencePool:
    """A pool as given, or one server around a bare client."""
    return servers if isinstance(servers, InferencePool) else InferencePool.single("", servers)


async def sample_group_on(pool: InferencePool, entry: EnvRows, row: dict[str, Any], config: RLConfig,
                          policy_step: int, errors: ErrorLog, teacher: TeacherClient | None = None) -> Group:
    """sample_group on one of the pool's servers, sampled again elsewhere if that server went down."""
    async def on(server: InferenceServerHandle) -> Group:
        try:
            return await sample_group(entry, row, server.client, config, policy_step, errors, teacher)
        except EndpointDown as exc:
            if len(pool.servers) == 1:
                raise
            raise ServerDown(str(exc)) from None

    return await pool.run_group(on, failed_here=lambda group: bool(group.errors))


async def collect_batch(sampler: EnvSampler, servers: InferencePool | Any, config: RLConfig,
                        buffer: SurplusGroups | None = None,
                        policy_step: int = 0, min_policy_step: int = 0, errors: ErrorLog | None = None,
                        step: int = 0, teacher: TeacherClient | None = None) -> BatchStats:
    """Groups from the surplus buffer (none sampled before min_policy_step), then rounds of (oversampled)
    groups until batch_size rollouts in kept groups. Groups with signal beyond that go to the buffer.
    Sampling stops early (stats.fault says why) once more than max_error_rate of the rollouts sampled for
    the step so far failed (the first round samples the whole batch, so its rate is the step's), and after
    a round in which every rollout errored: errors do not make the step sample round after round."""
    orch = config.orchestrator
    needed = orch.batch_size // orch.rollouts_per_example
    log = errors if errors is not None else ErrorLog()
    pool = as_pool(servers)
    stats = BatchStats()
    if buffer is not None:
        reused, stats.stale_dropped = buffer.take(needed, min_policy_step)
        stats.kept.extend(reused)
        stats.reused = len(reused)
    rejected: list[Group] = []
    rounds = 0
    while rounds < MAX_ROUNDS:
        missing = needed - len(stats.kept)
        if missing <= 0:
            break
        rounds += 1
        draws = [sampler.next() for _ in range(math.ceil(orch.oversampling_factor * missing))]
        groups = await gather_or_cancel(*(sample_group_on(pool, entry, row, config, policy_step, log, teacher)
                                        for entry, row in draws))
        stats.groups_sampled += len(groups)
        stats.all_groups.extend(groups)
        for group in groups:
            sampler.mark(group.env, group.example_id, difficulty(group, orch.buffer))
            if not keep_group(group, orch.buffer):
                stats.filtered += 1
                if group.rewards:
                    rejected.append(group)
            elif len(stats.kept) < needed:
                stats.kept.append(group)
            elif buffer is not None and has_signal(group):
                buffer.add(group)
        sampled, errored, policy = stats.counts()
        stats.fault = rate_fault(step, errored - policy, sampled, policy, orch.max_error_rate, log.first_fault,
                                 log.before)
        if stats.fault:
            return stats
        if all(sum(g.errors.values()) == g.rollouts for g in groups):
            break  # every rollout of the round errored: more rounds would too
    if len(stats.kept) < needed:
        # Filtering found too few groups with signal: fill with the others rather than stall the run
        # (their advantages are ~0, so they add little gradient). Logged so the user sees it.
        fill = rejected[: needed - len(stats.kept)]
        if fill:
            print(f"warning: only {len(stats.kept)} of {needed} groups passed filtering after {rounds} "
                  f"round{'' if rounds == 1 else 's'}; "
                  f"filling with {len(fill)} unfiltered groups", file=sys.stderr, flush=True)
        stats.kept.extend(fill)
    stats.buffered = len(buffer.groups) if buffer is not None else 0
    return stats


def checkpoint_path(output_dir: Path, step: int) -> Path:
    """What a resume at `step` reads (the trainer's checkpoint of the step holds it)."""
    return TrainingRunLayout(output_dir).orchestrator_checkpoint(step)


async def run(config: RLConfig, output_dir: Path, base_urls: str | list[str], resume_step: int | None) -> int:
    from prime_cli.train.plugin_api import EndpointSpec, OpenAIChatClient

    base_urls = [base_urls] if isinstance(base_urls, str) else base_urls
    servers = []
    for index, url in enumerate(base_urls):
        spec = EndpointSpec(f"policy-{index}", config.policy_name, url, None)
        client = OpenAIChatClient(spec, max_concurrent=config.orchestrator.max_concurrent, return_token_ids=True)
        eval_client = (OpenAIChatClient(spec, max_concurrent=config.orchestrator.max_concurrent)
                       if config.orchestrator.eval is not None else None)
        servers.append(InferenceServerHandle(url, client, eval_client))
    pool = InferencePool(servers)
    # on-policy distillation: the teacher scores on its own server, or on the first of the run's (where the
    # launcher serves a teacher adapter beside the policy)
    teacher = (TeacherClient(teacher_endpoint(config.orchestrator.teacher_model, config, base_urls[0]),
                             max_concurrent=config.orchestrator.max_concurrent)
               if config.trainer.loss.teacher_tau > 0 else None)
    try:
        await run_steps(config, output_dir, pool, resume_step or 0, teacher)
    finally:  # closed here: left to the garbage collector, they log "Event loop is closed" after the last line
        await pool.aclose()
        if teacher is not None:
            await teacher.aclose()
    return 0


async def run_steps(config: RLConfig, output_dir: Path, pool: InferencePool, start: int,
                    teacher: TeacherClient | None = None) -> None:
    sampler = EnvSampler(load_env_rows(config), seed=config.orchestrator_seed)
    buffer = SurplusGroups()
    if start:
        saved = json.loads(checkpoint_path(output_dir, start).read_text())
        sampler.restore(saved["sampler"])
        buffer.restore(saved.get("surplus", []))
    weights = PolicyWeights(output_dir, pool, config.policy_name)
    errors = ErrorLog()
    # online evals run on the first server (another one's failure mid-eval ends that eval, not the run)
    online = (OnlineEval(config, output_dir, pool.primary.url, pool.primary.eval_client, start)
              if config.orchestrator.eval is not None else None)
    for step in range(start + 1, config.max_steps + 1):
        step_started = time.perf_counter()
        oldest_allowed = max(0, step - 1 - config.orchestrator.max_async_level)
        if online is None:
            wait_weights_s = await weights.ensure(oldest_allowed)
        else:  # the due eval's weights are loaded (not skipped over), and the eval runs beside this step
            wait_weights_s = await weights.ensure(oldest_allowed, cap=online.next_step, before_load=online.wait)
            online.start_if_due(weights.loaded)
        generation_started = time.perf_counter()
        errors.begin_step(step)
        stats = await collect_batch(sampler, pool, config, buffer, weights.loaded or 0, oldest_allowed, errors, step,
                                    teacher)
        generation_s = time.perf_counter() - generation_started
        samples = [s for group in stats.kept for s in group_samples(group, config.trainer.loss)]
        if stats.fault:
            raise StepFault(stats.fault)
        if not samples:  # never hand the trainer an empty batch: a run that trains on nothing must not "succeed"
            sampled, errored, _ = stats.counts()
            raise StepFault(empty_batch_fault(step, sampled, errored, errors.first_fault or errors.first,
                                              config.orchestrator.rollouts_per_example, config.seq_len))
        sampled, errored, policy = stats.counts()
        errors.end_step(errored - policy, sampled)
        summary = stats.summary(step, weights.loaded or 0, generation_s, wait_weights_s, len(samples),
                                weights.last_load_s)
        if online is not None:
            summary["wait_eval_s"] = weights.last_before_load_s  # part of wait_weights_s
        if due(config, step):
            write_extras(output_dir, step, rl_extras(step, stats.all_groups, stats.kept, config))
        for group in stats.all_groups:  # texts kept for the table only: buffered groups do not carry them on
            group.rollout_log.clear()
        # the progress goes into checkpoints/step_N only with the trainer's checkpoint of step N (it copies it):
        # a checkpoint folder holding the orchestrator's half alone would look resumable and not be
        write_batch(TrainingRunLayout(output_dir).rollouts_dir(step), samples, summary,
                    {"step": step, "sampler": sampler.state(), "surplus": buffer.state()})
        errored = f", {summary['errored_rollouts']} of {summary['rollouts_sampled']} rollouts errored" \
            if summary["errored_rollouts"] else ""
        distilled = f", teacher KL {summary['teacher_kl']:.4f}" if "teacher_kl" in summary else ""
        print(f"step {step}: {len(samples)} samples, reward {summary['reward_mean']:.3f}{distilled}, "
              f"{stats.groups_sampled} groups sampled ({stats.reused} reused from the last steps){errored}, "
              f"generation {generation_s:.1f}s, waited {wait_weights_s:.1f}s for weights (policy step {weights.loaded}), "
              f"total {time.perf_counter() - step_started:.1f}s", flush=True)
    if online is not None:
        await online.finish(weights)
