"""Groups -> a training batch: advantages, online difficulty filtering, the step's numbers."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from prime_cli.train.plugin_api import BufferConfig, LossConfig, TrainingSample

from .teacher import teacher_kl, token_advantages


@dataclass
class Group:
    env: str
    example_id: Any
    rewards: list[float]
    samples: list[list[TrainingSample]]  # per rollout: its samples (usually one)
    completion_tokens: int = 0
    truncated: int = 0
    dropped_rollouts: int = 0  # errored rollouts left out of the group (every error but the policy's)
    policy_errors: int = 0  # errored because of the policy: reward 0, no samples
    rollouts: int = 0  # sampled, errored ones included
    errors: dict[str, int] = field(default_factory=dict)  # error kind -> errored rollouts (one kind each)
    metric_errors: int = 0  # rollouts (trained on) where a zero-weight metric raised
    policy_step: int = 0  # the weights that sampled it
    scoring_s: float = 0.0  # the group's reward computation (inside generation_s)
    # [wandb.log_extras]: each sampled rollout's texts for the step's table (wandb_extras), never saved
    rollout_log: list[Any] = field(default_factory=list, repr=False)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0


def has_signal(group: Group) -> bool:
    return bool(group.rewards) and max(group.rewards) - min(group.rewards) >= 1e-9


def keep_group(group: Group, buffer: BufferConfig) -> bool:
    """False for groups that carry no learning signal under the configured filters."""
    if not group.rewards or not any(group.samples):
        return False
    if buffer.online_difficulty_filtering and not has_signal(group):
        return False
    if buffer.min_reward_variance is not None and statistics.pvariance(group.rewards) < buffer.min_reward_variance:
        return False
    return True


def difficulty(group: Group, buffer: BufferConfig) -> str:
    """prime-rl's pools: "easy" at or above easy_threshold, "hard" at or below hard_threshold, else "normal"."""
    if not group.rewards:
        return "normal"
    if buffer.easy_threshold is not None and group.mean >= buffer.easy_threshold:
        return "easy"
    if buffer.hard_threshold is not None and group.mean <= buffer.hard_threshold:
        return "hard"
    return "normal"


def group_samples(group: Group, loss: LossConfig | None = None) -> list[TrainingSample]:
    """The group's samples with advantage = reward - group mean (a rollout the policy errored in counts
    in the mean and has no samples); with `loss` of a distillation run (teacher_tau > 0), the samples the
    teacher scored get their token_advantages too."""
    out = []
    for reward, samples in zip(group.rewards, group.samples, strict=True):
        for sample in samples:
            each = {**sample, "advantage": reward - group.mean, "reward": reward, "env": group.env,
                    "example_id": group.example_id, "policy_step": group.policy_step}
            if loss is not None and loss.teacher_tau > 0 and "teacher_logprobs" in each:
                each["token_advantages"] = token_advantages(each, each["advantage"], loss.adv_tau, loss.teacher_tau)
            out.append(each)
    return out


def length_stats(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Prompt (tokens before the first trained token) and completion (the rest) lengths of the samples."""
    prompts = [s["loss_mask"].index(1) for s in samples]
    completions = [len(s["input_ids"]) - p for s, p in zip(samples, prompts, strict=True)]
    out: dict[str, float] = {}
    for name, values in (("prompt_len", prompts), ("completion_len", completions)):
        out[f"{name}_mean"] = statistics.fmean(values) if values else 0.0
        out[f"{name}_max"] = max(values, default=0)
    return out


def error_rates(groups: list[Group]) -> dict[str, float]:
    """error_rate over every sampled rollout, error_rate/<kind> (flat keys, so W&B plots them; they add up
    to error_rate), the counts behind them, and metric_error_rate (zero-weight metrics that raised)."""
    sampled = sum(g.rollouts for g in groups)
    by_kind: dict[str, int] = {}
    for group in groups:
        for kind, count in group.errors.items():
            by_kind[kind] = by_kind.get(kind, 0) + count
    return {"rollouts_sampled": sampled, "errored_rollouts": sum(by_kind.values()),
            "error_rate": sum(by_kind.values()) / (sampled or 1),
            **{f"error_rate/{kind}": count / (sampled or 1) for kind, count in sorted(by_kind.items())},
            "metric_error_rate": sum(g.metric_errors for g in groups) / (sampled or 1)}


@dataclass
class BatchStats:
    groups_sampled: int = 0
    kept: list[Group] = field(default_factory=list)  # reused groups from the surplus buffer first
    all_groups: list[Group] = field(default_factory=list)  # sampled for this step
    filtered: int = 0  # sampled groups the filter refused
    reused: int = 0  # kept groups taken from the surplus buffer
    stale_dropped: int = 0  # buffered groups too old for this step
    buffered: int = 0  # groups in the surplus buffer after this step
    fault: str | None = None  # why sampling stopped: more than max_error_rate of the rollouts failed

    def counts(self) -> tuple[int, int, int]:
        """(rollouts sampled for this step, errored ones, of those the policy's errors)."""
        return (sum(g.rollouts for g in self.all_groups), sum(sum(g.errors.values()) for g in self.all_groups),
                sum(g.policy_errors for g in self.all_groups))

    def summary(self, step: int, policy_step: int, generation_s: float, wait_weights_s: float,
                num_samples: int, load_weights_s: float = 0.0) -> dict[str, Any]:
        rewards = [r for g in self.kept for r in g.rewards]
        per_env: dict[str, dict[str, Any]] = {}
        for env in sorted({g.env for g in self.kept}):
            env_rewards = [r for g in self.kept if g.env == env for r in g.rewards]
            per_env[env] = {"reward_mean": statistics.fmean(env_rewards),
                            "reward_std": statistics.pstdev(env_rewards), "count": len(env_rewards)}
        groups = self.all_groups or [None]
        rollouts = sum(g.rollouts for g in self.all_groups) or 1
        samples = [s for g in self.kept for s in group_samples(g)]
        return {
            # a batch holding reused groups is as old as its oldest group's weights
            "step": step, "policy_step": min((g.policy_step for g in self.kept), default=policy_step),
            "reward_mean": statistics.fmean(rewards) if rewards else 0.0,
            "reward_std": statistics.pstdev(rewards) if rewards else 0.0,
            "per_env": per_env,
            "solve_all": sum(1 for g in self.all_groups if g.rewards and min(g.rewards) >= 1.0) / len(groups),
            "solve_none": sum(1 for g in self.all_groups if g.rewards and max(g.rewards) <= 0.0) / len(groups),
            "effective_batch_size": num_samples,
            "groups_sampled": self.groups_sampled, "groups_kept": len(self.kept),
            "filtered_fraction": self.filtered / (self.groups_sampled or 1),
            "groups_reused": self.reused, "groups_stale_dropped": self.stale_dropped, "groups_buffered": self.buffered,
            "generation_s": generation_s, "scoring_s": sum(g.scoring_s for g in self.all_groups),
            "wait_weights_s": wait_weights_s, "load_weights_s": load_weights_s,
            "completion_tokens": sum(g.completion_tokens for g in self.all_groups),
            **length_stats(samples),
            "truncated_fraction": sum(g.truncated for g in self.all_groups) / rollouts,
            "dropped_rollouts": sum(g.dropped_rollouts for g in self.all_groups),
            "policy_error_rollouts": sum(g.policy_errors for g in self.all_groups),
            **error_rates(self.all_groups),
            **({} if (kl := teacher_kl(samples)) is None else {"teacher_kl": kl}),
        }
