"""Rubrics: score rollouts with weighted reward functions."""

from .judge_rubric import DEFAULT_JUDGE_PROMPT, JudgeRubric
from .rubric import RolloutScore, Rubric, write_scores
from .rubric_group import RubricGroup, merge_scores

__all__ = [
    "DEFAULT_JUDGE_PROMPT",
    "JudgeRubric",
    "RolloutScore",
    "Rubric",
    "RubricGroup",
    "merge_scores",
    "write_scores",
]
