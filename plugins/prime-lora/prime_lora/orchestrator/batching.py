"""Groups -> a training batch: advantages, online difficulty filtering, the step's numbers."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from prime_cli.train.plugin_api import BufferConfig, TrainingSample


@dataclass
class Group:
    env: str
    example_id: Any
    rewards: list[float]
    samples: list[list[TrainingSample]]  # per rollout: its samples (usually one)
    completion_tokens: int = 0
    truncated: int = 0
    dropped_rollouts: int = 0
    scoring_s: float = 0.0  # the group's reward computation (inside generation_s)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0


def keep_group(group: Group, buffer: BufferConfig) -> bool:
    """False for groups that carry no learning signal under the configured filters."""
    if not group.rewards:
        return False
    if buffer.online_difficulty_filtering and max(group.rewards) - min(group.rewards) < 1e-9:
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


def group_samples(group: Group, policy_step: int) -> list[TrainingSample]:
    """The group's samples with advantage = reward - group mean."""
    out = []
    for reward, samples in zip(group.rewards, group.samples, strict=True):
        for sample in samples:
            out.append({**sample, "advantage": reward - group.mean, "reward": reward, "env": group.env,
                        "example_id": group.example_id, "policy_step": policy_step})
    return out


@dataclass
class BatchStats:
    groups_sampled: int = 0
    kept: list[Group] = field(default_factory=list)
    all_groups: list[Group] = field(default_factory=list)

    def summary(self, step: int, policy_step: int, generation_s: float, wait_weights_s: float,
                num_samples: int, load_weights_s: float = 0.0) -> dict[str, Any]:
        rewards = [r for g in self.kept for r in g.rewards]
        per_env: dict[str, dict[str, Any]] = {}
        for env in sorted({g.env for g in self.kept}):
            env_rewards = [r for g in self.kept if g.env == env for r in g.rewards]
            per_env[env] = {"reward_mean": statistics.fmean(env_rewards),
                            "reward_std": statistics.pstdev(env_rewards), "count": len(env_rewards)}
        groups = self.all_groups or [None]
        rollouts = sum(len(g.rewards) for g in self.all_groups) or 1
        return {
            "step": step, "policy_step": policy_step,
            "reward_mean": statistics.fmean(rewards) if rewards else 0.0,
            "reward_std": statistics.pstdev(rewards) if rewards else 0.0,
            "per_env": per_env,
            "solve_all": sum(1 for g in self.all_groups if g.rewards and min(g.rewards) >= 1.0) / len(groups),
            "solve_none": sum(1 for g in self.all_groups if g.rewards and max(g.rewards) <= 0.0) / len(groups),
            "effective_batch_size": num_samples,
            "groups_sampled": self.groups_sampled, "groups_kept": len(self.kept),
            "generation_s": generation_s, "scoring_s": sum(g.scoring_s for g in self.all_groups),
            "wait_weights_s": wait_weights_s, "load_weights_s": load_weights_s,
            "completion_tokens": sum(g.completion_tokens for g in self.all_groups),
            "truncated_fraction": sum(g.truncated for g in self.all_groups) / rollouts,
            "dropped_rollouts": sum(g.dropped_rollouts for g in self.all_groups),
        }
