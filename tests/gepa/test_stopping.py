"""GEPA's stop conditions: each says whether it holds and why, for the search now or as foreseen."""

from prime_cli.gepa.config import build_config
from prime_cli.gepa.stopping import MAX_IDLE_COMMITS, SearchPoint, StopConditions


def conditions(**overrides):
    values = {"env_id": "toy", "model": "student", "reflection_model": "reflector", "max_calls": 100,
              "num_train": 20, "num_val": 10, "minibatch_size": 3}
    return StopConditions(build_config("test", **{**values, **overrides}))  # a fresh minibatch 6 (a proposal's most), validation 10


def test_a_launch_needs_room_for_its_minibatches_and_a_validation_beside_the_reserve_of_those_in_flight():
    stops = conditions()  # a validation pass is 10 rows, all of them the minimum too
    assert stops.allow_launch(SearchPoint(used=84, in_flight=0))  # 84 + 6 + 10 = 100
    assert not stops.allow_launch(SearchPoint(used=85, in_flight=0))
    assert stops.allow_launch(SearchPoint(used=68, in_flight=1))  # 68 + (6 + 10) + (6 + 10) = 100
    assert not stops.allow_launch(SearchPoint(used=69, in_flight=1))
    assert stops.stop_reason(SearchPoint(used=100, in_flight=0)) is None  # the budget is the normal end
    # a winner committed now may spend what the two still in flight leave: 100 - 40 - 2 x (6 + 10)
    assert stops.budget.validation_allowance(SearchPoint(used=40, in_flight=2)) == 28


def test_the_first_proposal_needs_a_partial_validation_and_parallel_ones_a_whole_pass_each():
    stops = conditions(num_val=50, max_calls=300)  # a pass is 50 rollouts, the least validation 10
    assert stops.allow_launch(SearchPoint(used=284, in_flight=0))  # 284 + 6 + 10 = 300
    assert not stops.allow_launch(SearchPoint(used=285, in_flight=0))
    assert stops.allow_launch(SearchPoint(used=188, in_flight=1))  # 188 + (6 + 50) + (6 + 50) = 300
    assert not stops.allow_launch(SearchPoint(used=189, in_flight=1))
    assert stops.budget.validation_allowance(SearchPoint(used=250, in_flight=1)) == 300 - 250 - 16


def test_repeats_and_fruitless_reflections_end_the_search_with_their_reason():
    stops = conditions(max_reflection_failures=2)
    repeats = SearchPoint(used=0, in_flight=0, idle_commits=MAX_IDLE_COMMITS)
    assert not stops.allow_launch(repeats)
    assert stops.stop_reason(repeats) == "the last proposals only repeated rollouts already made"
    exhausted = SearchPoint(used=0, in_flight=1, fruitless_reflections=2, last_fruitless="not better on minibatch")
    assert not stops.allow_launch(exhausted)
    assert stops.stop_reason(exhausted) == (
        "the reflection model gave no new prompt to try in 2 proposals in a row (last: not better on minibatch), "
        "and their minibatch rollouts were all paid for already")
    assert stops.allow_launch(SearchPoint(used=0, in_flight=0, fruitless_reflections=1))


def test_failing_reflections_end_the_run_at_a_commit_but_never_block_a_launch():
    stops = conditions(max_reflection_failures=3)
    failing = SearchPoint(used=0, in_flight=0, reflection_failures=3, last_failure="reflection failed: HTTP 500")
    assert stops.reflections_failing.holds(failing)
    assert stops.reflections_failing.reason(failing) == "the reflection model reflector failed 3 times in a row (last: HTTP 500)"
    assert stops.allow_launch(failing)  # a resumed run tries the reflection model again


def test_a_foreseen_rejection_spends_a_proposal_and_counts_as_buying_nothing():
    point = SearchPoint(used=10, in_flight=2, idle_commits=MAX_IDLE_COMMITS - 1, fruitless_reflections=1)
    after = point.after_rejection(6)
    assert (after.used, after.in_flight, after.idle_commits, after.fruitless_reflections) == (16, 1, MAX_IDLE_COMMITS, 1)
    assert not conditions().allow_launch(after)
    assert after.after_launch().in_flight == 2
