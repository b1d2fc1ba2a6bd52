"""What a training run's orchestrator hands its trainer: one `TrainingSample` per line of
rollouts/step_N/batch.jsonl (the folders are named by `TrainingRunLayout`). The trainer plugin
imports both through `prime_cli.train.plugin_api`."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from prime_cli.runs.layouts import TrainingRunLayout

__all__ = ["TrainingRunLayout", "TrainingSample"]


class TrainingSample(TypedDict, total=False):
    """One token sequence to train on: a rollout (or one model call of a multi-turn rollout whose
    chat template re-tokenised the history), with its group-relative advantage."""

    input_ids: list[int]  # prompt and completion tokens, as the inference server returned them
    loss_mask: list[int]  # 1 on tokens the policy sampled (the loss is taken there), 0 elsewhere
    inference_logprobs: list[float]  # the server's logprob of each token (0.0 where loss_mask is 0)
    truncated: bool  # cut at seq_len, or the rollout itself was truncated
    advantage: float  # reward minus the group's mean reward
    reward: float
    env: str  # the environment id of the group
    example_id: Any
    policy_step: int  # the weights step that sampled it (how far off-policy it is)
    # on-policy distillation: the teacher's log-prob of each token, and each token's advantage
    # (adv_tau * advantage + teacher_tau * (teacher - inference log-prob) on loss tokens, 0 elsewhere), which
    # the trainer takes in place of `advantage` when present
    teacher_logprobs: list[float]
    token_advantages: list[float]
