"""Is a run a useful RL baseline? Reward diversity within groups, and difficulty at the pass threshold.

Group-relative RL (GRPO and the prime-lora trainer) learns from reward differences between the
rollouts of one example (a group): a group whose rewards are all equal has zero advantage and
teaches nothing. So the summary reports, over groups of two or more rollouts, the mean within-group
reward standard deviation and the fraction of groups whose rewards are all equal; with one rollout
per example there are no groups to compare (`-r 1`), and it says so.

Difficulty is the fraction of rollouts whose reward is at or above the pass threshold. Above 80%
the baseline is too easy (little left to learn), below 5% too hard (almost no rollout succeeds).
Rollouts that ended with an error are left out of both: an error says nothing about difficulty.
"""

from __future__ import annotations

import json
import shlex
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from prime_cli.records.eval_run import Rollout, Summary

from .row_values import example_key, reward_value

TOO_EASY = 0.80
TOO_HARD = 0.05
EQUAL_TOLERANCE = 1e-9

ADVICE = {
    "too easy": "little to learn: use harder examples (or a weaker model) so that rollouts of an example disagree",
    "too hard": ("no signal: groups whose rewards are all equal give zero advantage; use easier examples, "
                 "a stronger model or partial-credit rewards"),
}
PARTIAL_CREDIT_ADVICE = ("rewards below the threshold still vary within groups (mean std {std:.3f}), so there is "
                         "some signal; lower --pass-threshold if partial credit counts as a pass")






def _groups(rows: Sequence[Rollout]) -> dict[Any, list[float]]:
    groups: dict[Any, list[float]] = defaultdict(list)
    for row in rows:
        groups[example_key(row.get("example_id"))].append(reward_value(row.get("reward")))
    return groups


def reward_diversity(rows: Sequence[Rollout], rollouts_per_example: int) -> dict[str, Any]:
    """Within-group reward spread of `rows` (rollouts without errors) of a run with `rollouts_per_example`."""
    groups = _groups(rows)
    compared = [rewards for rewards in groups.values() if len(rewards) >= 2]
    equal = sum(1 for rewards in compared if max(rewards) - min(rewards) <= EQUAL_TOLERANCE)
    note = None
    if not compared:
        note = ("needs more than one rollout per example (-r > 1)" if rollouts_per_example < 2
                else "no example has two rollouts without errors")
    return {
        "groups": len(groups),
        "groups_compared": len(compared),
        "mean_group_reward_std": statistics.fmean(statistics.pstdev(r) for r in compared) if compared else None,
        "all_equal_groups": equal,
        "all_equal_fraction": equal / len(compared) if compared else None,
        "note": note,
    }


def difficulty(rows: Sequence[Rollout], pass_threshold: float, diversity: dict[str, Any]) -> dict[str, Any]:
    passed = sum(1 for row in rows if reward_value(row.get("reward")) >= pass_threshold)
    rate = passed / len(rows) if rows else None
    verdict = None if rate is None else "too easy" if rate > TOO_EASY else "too hard" if rate < TOO_HARD else "ok"
    advice = ADVICE.get(verdict or "")
    std, equal = diversity.get("mean_group_reward_std"), diversity.get("all_equal_fraction")
    if verdict == "too hard" and std and equal is not None and equal < 0.5:
        advice = PARTIAL_CREDIT_ADVICE.format(std=std)
    return {"pass_threshold": pass_threshold, "rollouts": len(rows), "passed": passed, "pass_rate": rate,
            "verdict": verdict, "advice": advice}


def reward_signal(rows: Sequence[Rollout], pass_threshold: float) -> dict[str, Any]:
    """The `reward_diversity` and `difficulty` entries of a run's summary."""
    scored = [row for row in rows if not row.get("error")]
    diversity = reward_diversity(scored, max((len(g) for g in _groups(rows).values()), default=0))
    level = difficulty(scored, pass_threshold, diversity)
    diversity["errored_rollouts_left_out"] = level["errored_rollouts_left_out"] = len(rows) - len(scored)
    return {"reward_diversity": diversity, "difficulty": level}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def reward_signal_lines(summary: Summary) -> list[tuple[str, str, str]]:
    """(label, text, style) lines of the summary view: diversity, difficulty, what to do."""
    lines: list[tuple[str, str, str]] = []
    diversity, level = summary.get("reward_diversity"), summary.get("difficulty")
    if isinstance(diversity, dict) and diversity.get("groups"):
        if diversity.get("groups_compared"):
            equal, compared = diversity.get("all_equal_groups") or 0, diversity["groups_compared"]
            fraction = diversity.get("all_equal_fraction") or 0.0
            lines.append(("Group diversity", f"mean within-group reward std {diversity['mean_group_reward_std']:.3f}; "
                          f"all rewards equal in {equal}/{compared} groups ({_pct(fraction)})",
                          "yellow" if fraction >= 0.5 else ""))
        elif "-r > 1" in str(diversity.get("note")):
            lines.append(("Group diversity", "not measured: one rollout per example; use -r 2 or more to see "
                          "whether rollouts of an example get different rewards", "dim"))
        else:
            lines.append(("Group diversity", f"not measured: {diversity.get('note')}", "yellow"))
    check = summary.get("reward_check")
    if isinstance(check, dict):
        lines.append(_reward_check_line(check, summary.get("pass_threshold")))
    if isinstance(level, dict) and level.get("pass_rate") is not None:
        left_out = level.get("errored_rollouts_left_out") or 0
        errored = f", {left_out} with errors left out" if left_out else ""
        verdict = level.get("verdict")
        judgement = f": {verdict} for RL" if verdict in ADVICE else ": in range for RL"
        lines.append(("Difficulty", f"{_pct(level['pass_rate'])} of rollouts reach reward >= "
                      f"{float(level['pass_threshold'])} (--pass-threshold; {level['passed']}/{level['rollouts']}"
                      f"{errored}){judgement}", "bold yellow" if verdict in ADVICE else "green"))
        if level.get("advice"):
            lines.append(("What to do", str(level["advice"]), "yellow"))
    return lines


def constant_reward_suspect(reward: Any, pass_threshold: Any) -> bool:
    """Is one reward on every scored rollout a sign of a broken rubric? Yes when it is 0 (or less) or below the
    pass threshold (no rollout passes, and none does better than another); a reward every rollout passes with
    is what a model that gets everything right earns, not a fault (it still gives RL nothing to learn from)."""
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return True
    threshold = float(pass_threshold) if isinstance(pass_threshold, (int, float)) else 1.0
    return value <= 0 or value < threshold


def _reward_check_line(check: dict[str, Any], pass_threshold: Any) -> tuple[str, str, str]:
    rollouts, reward, command = check.get("rollouts"), check.get("reward"), check.get("command")
    if constant_reward_suspect(reward, pass_threshold):
        return ("Check the reward", f"all {rollouts} rollouts got reward {reward}: before blaming the model, run "
                f"`{command}` (no model calls) to see whether the rubric can tell a right answer from a wrong one",
                "bold yellow")
    threshold = float(pass_threshold) if isinstance(pass_threshold, (int, float)) else 1.0
    return ("Same reward", f"all {rollouts} rollouts got reward {reward}, at or above --pass-threshold {threshold}: "
            f"every one passed, so there is no reward diversity for RL to learn from (`{command}` shows whether "
            "the rubric scores a wrong answer lower)", "")


def reward_check(rows: Sequence[Rollout], env_id: str, env_args: dict[str, Any]) -> dict[str, Any] | None:
    """When every scored rollout got the same reward (all zero, say): the command that checks the rubric
    against reference and adversarial replies without a model (`prime env check`), so that a broken reward
    is not taken for a weak model. None otherwise. The summary warns only when the reward is a suspect
    (`constant_reward_suspect`: 0, or below the pass threshold); a reward every rollout passes with gets a
    neutral line."""
    rewards = {reward_value(row.get("reward")) for row in rows if not row.get("error")}
    scored = sum(1 for row in rows if not row.get("error"))
    if scored < 2 or len(rewards) != 1:
        return None
    command = ["prime", "env", "check", env_id] + (["-a", json.dumps(env_args)] if env_args else [])
    return {"reward": rewards.pop(), "rollouts": scored, "command": shlex.join(command)}
