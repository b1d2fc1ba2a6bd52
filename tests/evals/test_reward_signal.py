"""Reward diversity within groups and difficulty at the pass threshold (prime_cli.results.reward_signal)."""

from __future__ import annotations

import pytest

from prime_cli.results.reward_signal import reward_signal, reward_signal_lines


def rows(rewards_by_example: dict[int, list[float]], errored: set[tuple[int, int]] = frozenset()) -> list[dict]:
    return [{"example_id": e, "rollout_idx": i, "reward": r, "error": {"type": "X"} if (e, i) in errored else None}
            for e, rewards in rewards_by_example.items() for i, r in enumerate(rewards)]


def test_mean_within_group_std_and_all_equal_fraction():
    signal = reward_signal(rows({0: [1.0, 1.0], 1: [0.0, 1.0], 2: [0.25, 0.25, 0.25, 0.75]}), 1.0)
    diversity = signal["reward_diversity"]
    assert diversity["mean_group_reward_std"] == pytest.approx((0.0 + 0.5 + 0.21650635) / 3)
    assert (diversity["all_equal_groups"], diversity["groups_compared"]) == (1, 3)
    assert diversity["all_equal_fraction"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("rewards", "threshold", "verdict"), [
    ([1.0] * 9 + [0.0], 1.0, "too easy"),    # 90% > 80%
    ([1.0] * 8 + [0.0] * 2, 1.0, "ok"),      # exactly 80% is not too easy
    ([0.0] * 20, 1.0, "too hard"),
    ([1.0] + [0.0] * 19, 1.0, "ok"),         # exactly 5% is not too hard
    ([0.5] * 20, 0.5, "too easy"),           # "at or above" the threshold passes
])
def test_difficulty_is_the_fraction_at_or_above_the_pass_threshold(rewards, threshold, verdict):
    level = reward_signal(rows({i: [r] for i, r in enumerate(rewards)}), threshold)["difficulty"]
    assert level["pass_rate"] == sum(r >= threshold for r in rewards) / len(rewards)
    assert level["verdict"] == verdict


def test_too_hard_with_partial_credit_varying_within_groups_suggests_the_threshold():
    signal = reward_signal(rows({0: [0.1, 0.6], 1: [0.3, 0.9]}), 1.0)
    assert signal["difficulty"]["verdict"] == "too hard"
    assert "lower --pass-threshold" in signal["difficulty"]["advice"]
    flat = reward_signal(rows({0: [0.0, 0.0], 1: [0.0, 0.0]}), 1.0)
    assert "zero advantage" in flat["difficulty"]["advice"]


def test_errored_rollouts_are_left_out_and_counted():
    signal = reward_signal(rows({0: [1.0, 0.0], 1: [0.0, 0.0]}, errored={(0, 1), (1, 0), (1, 1)}), 1.0)
    assert signal["difficulty"]["rollouts"] == 1 and signal["difficulty"]["errored_rollouts_left_out"] == 3
    assert signal["reward_diversity"]["note"] == "no example has two rollouts without errors"


def test_one_rollout_per_example_is_not_measured_and_the_view_says_use_r():
    signal = reward_signal(rows({0: [1.0], 1: [0.0]}), 1.0)
    assert signal["reward_diversity"]["mean_group_reward_std"] is None
    labels = {label: text for label, text, _ in reward_signal_lines(signal)}
    assert labels["Group diversity"].startswith("not measured: one rollout per example; use -r 2")
    assert labels["Difficulty"] == "50.0% of rollouts reach reward >= 1.0 (--pass-threshold; 1/2): in range for RL"
    assert "What to do" not in labels


def test_no_rows_give_no_lines():
    assert reward_signal_lines(reward_signal([], 1.0)) == []
