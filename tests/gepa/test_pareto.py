"""Pareto fronts per validation row and GEPA's parent selection."""

import random
from collections import Counter

import pytest

from prime_cli.gepa.pareto import (
    best_candidate,
    front_counts,
    in_contention,
    non_dominated,
    row_fronts,
    select_parent,
)

SCORES = [
    [0.0, 0.0, 0.0, 0.0],  # 0: on no front
    [1.0, 0.0, 0.5, 0.0],  # 1: rows 0, 2
    [1.0, 1.0, 0.0, 0.0],  # 2: rows 0, 1
    [0.0, 1.0, 0.0, 1.0],  # 3: rows 1, 3
    [1.0, 1.0, 0.0, 0.0],  # 4: same rows as 2
    [0.0, 0.0, 0.5, 0.0],  # 5: row 2 only, inside 1's fronts -> dominated
]


def test_row_fronts_hold_every_candidate_with_the_best_score():
    assert row_fronts(SCORES) == [{1, 2, 4}, {2, 3, 4}, {1, 5}, {3}]


def test_dominated_and_frontless_candidates_are_dropped_ties_kept():
    assert non_dominated(row_fronts(SCORES)) == {1, 2, 3, 4}
    assert front_counts(row_fronts(SCORES)) == {1: 2, 2: 2, 3: 2, 4: 2}


def test_parent_is_drawn_among_non_dominated_weighted_by_front_count():
    scores = [[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.0]]
    assert front_counts(row_fronts(scores)) == {0: 3, 1: 1}
    rng = random.Random(7)
    draws = Counter(select_parent(scores, rng) for _ in range(4000))
    assert set(draws) == {0, 1}
    assert 2.5 < draws[0] / draws[1] < 3.5


def test_selection_is_reproducible_from_the_rng_state():
    a, b = random.Random(3), random.Random(3)
    assert [select_parent(SCORES, a) for _ in range(50)] == [select_parent(SCORES, b) for _ in range(50)]


def test_best_candidate_is_the_highest_mean_earliest_on_ties():
    assert best_candidate(SCORES) == 2
    assert best_candidate([[0.5], [0.5]]) == 0


def test_an_errored_row_takes_no_part_in_fronts_or_means():
    # candidate 1 errored on row 0 (None): it is not on that row's front, and its mean is over rows 1, 2
    scores = [[0.5, 0.6, 0.5], [None, 1.0, 0.5], [None, None, None]]
    assert row_fronts(scores) == [{0}, {1}, {0, 1}]
    assert best_candidate(scores) == 1  # 0.75 over its scored rows; with a 0 for row 0, 0.5 < candidate 0's 0.533
    assert best_candidate([[None, None], [0.0, 0.0]]) == 1  # scored on no row: ranks last
    assert row_fronts([[None], [None]]) == [set()]


def test_the_best_is_chosen_on_the_rows_every_candidate_was_scored_on():
    """A child that errored on the seed's four hard rows is not ranked on the easy ones alone: on the six rows
    both have, the seed is better (1.0 against 0.9)."""
    from prime_cli.gepa.pareto import best_candidate

    assert best_candidate([[0.2] * 4 + [1.0] * 6, [None] * 4 + [0.9] * 6]) == 0
    assert best_candidate([[0.5, 0.5], [0.6, 0.7]]) == 1
    assert best_candidate([[None, 1.0], [0.5, None]]) == 0  # no common row: each on its own rows


def test_a_partially_validated_candidate_does_not_narrow_the_ranking_of_the_others():
    """Candidates 0 and 1 were validated on all four rows, candidate 2 (a late winner) on rows 0 and 1 only
    (None: not run). 1 leads on all four rows; ranking everyone on rows 0-1 would pick 0 instead."""
    scores = [[1.0, 1.0, 0.0, 0.0], [0.0, 0.5, 1.0, 1.0], [0.0, 0.0, None, None]]
    assert best_candidate(scores, [4, 4, 2]) == 1
    assert best_candidate(scores) == 0  # read as errored rows (older runs): the rows every one was scored on


def test_a_partially_validated_candidate_wins_only_a_paired_comparison_on_its_rows():
    leader = [0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0]
    rest = [None] * 4
    assert best_candidate([leader, [1.0, 1.0, 1.0, 1.0, *rest]], [8, 4]) == 1  # +1 on each of rows 0-3
    assert best_candidate([leader, [1.0, 0.0, 0.0, 0.0, *rest]], [8, 4]) == 0  # one row more: noise, not a win
    assert best_candidate([leader, [1.0, 1.0, 0.0, 0.0, *rest]], [8, 4]) == 1  # two rows more, none fewer
    assert best_candidate([[1.0, *leader[1:]], [0.0, 1.0, 1.0, 0.0, *rest]], [8, 4]) == 0  # two more, one fewer
    assert best_candidate([leader, [0.0, 0.0, 0.0, 0.0, *rest]], [8, 4]) == 0  # level: the leader keeps it
    # two challengers are ranked with the leader on the rows all three were scored on (rows 0-3 here)
    assert best_candidate([leader, [1.0, 1.0, 1.0, 1.0, 1.0, None, None, None], [1.0, 1.0, 1.0, 0.5, *rest]],
                          [8, 5, 4]) == 1
    assert best_candidate([leader, [1.0, 1.0, 1.0, 0.5, 1.0, None, None, None], [1.0, 1.0, 1.0, 1.0, *rest]],
                          [8, 5, 4]) == 2


def test_a_candidate_clearly_below_the_leader_is_not_a_parent_though_it_is_on_a_front():
    """Under sampling noise nearly every candidate is on some row's front (it got one row right that the others
    missed by chance), so a weak old candidate would keep being drawn and its children validated for nothing.
    Parents are drawn among the candidates whose paired 95% interval against the leader reaches 0."""
    leader = [1.0] * 18 + [0.0, 0.0]
    weak = [0.0] * 18 + [1.0, 0.0]  # alone on row 18's front, far below the leader everywhere else
    close = [0.0] + [1.0] * 17 + [0.0, 1.0]  # level with the leader: misses row 0, gets row 19
    scores = [leader, weak, close]
    assert front_counts(row_fronts(scores))[1] == 1  # GEPA's front alone keeps it
    assert in_contention(scores, 0) == [0, 2]
    rng = random.Random(5)
    draws = Counter(select_parent(scores, rng) for _ in range(500))
    assert set(draws) == {0, 2}


def test_the_whole_validation_score_of_a_partial_candidate_is_the_leaders_mean_plus_its_paired_lead():
    from prime_cli.gepa.pareto import whole_validation_score

    leader = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]  # mean 4/6, fully validated
    late = [1.0, 1.0, 1.0, None, None, None]  # run on 3 rows: 1.0 there, a lead of 1/3 over the leader
    assert whole_validation_score([leader, late], [6, 3], 1) == pytest.approx(4 / 6 + 1 / 3)
    assert whole_validation_score([leader, late], [6, 3], 0) == pytest.approx(4 / 6)
    assert whole_validation_score([late], [3], 0) == 1.0  # no fully validated candidate: its own mean
    assert whole_validation_score([leader, late], None, 1) == 1.0  # no row counts: nobody is partial
