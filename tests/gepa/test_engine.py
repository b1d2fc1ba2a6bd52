"""The GEPA engine with scripted student and reflection models (in process, deterministic)."""

import asyncio
import io
import json

import pytest

from prime_cli.envs.errors import EnvConfigError
from prime_cli.gepa.api import run_search
from tests.gepa import support

# every test writes the same toy environment into its own folder; the copy imported by the first is
# used by all (the loader says so with this warning, which is right but expected here)
pytestmark = pytest.mark.filterwarnings("ignore::prime_cli.envs.loader.LocalEnvironmentWarning")


config, lines = support.toy_config, support.lines


def search(cfg, student=None, reflector=None, resume=False, on_commit=None):
    student = student or support.student()
    reflector = reflector or support.reflector()
    outcome, run_dir = asyncio.run(run_search(cfg, resume, io.StringIO(), pools=(student, reflector),
                                              on_commit=on_commit))
    return outcome, run_dir, student, reflector


def confirm_keys(run_dir):
    """The final pick's fresh validation rollouts the run charged (picking.py)."""
    return [k for k in json.loads((run_dir / "state.json").read_text())["charged"] if k.startswith("confirm/")]


def without_time(rows):
    return [{k: v for k, v in row.items() if k != "time_s"} for row in rows]


def test_search_improves_and_every_rollout_is_paid_once(workdir):
    outcome, run_dir, student, reflector = search(config(workdir / "run"))
    assert outcome.status == "completed"
    candidates = lines(run_dir / "candidates.jsonl")
    iterations = lines(run_dir / "iterations.jsonl")
    assert candidates[0]["candidate_idx"] == 0 and candidates[0]["parent_idx"] is None
    assert candidates[-1]["val_mean"] > candidates[0]["val_mean"]
    # the budget counts distinct rollouts, and the cache means each was sent to the model once
    sent = {(c["messages"][0]["content"] if c["messages"][0]["role"] == "system" else "", c["messages"][-1]["content"])
            for c in student.client.calls}
    # ... but for the final pick's fresh rollouts, the same prompt on the same validation row again (picking.py)
    assert len(student.client.calls) == outcome.total_metric_calls == len(sent) + len(confirm_keys(run_dir))
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["total_metric_calls"] == outcome.total_metric_calls == iterations[-1]["metric_calls"] + len(confirm_keys(run_dir))
    assert meta["status"] == "completed" and meta["num_candidates"] == len(candidates)
    # only accepted children were scored on validation rows (the seed too): 10 val rows each
    val_calls = [c for c in student.client.calls if "item" in c["messages"][-1]["content"]
                 and any(c["messages"][-1]["content"] == f"kind:{k} item {i}" for k in support.KINDS for i in range(40))]
    assert len(val_calls) >= 10 * len(candidates)
    accepted = [it for it in iterations if it["accepted"]]
    assert [it["child_idx"] for it in accepted] == list(range(1, len(candidates)))
    assert len(reflector.client.calls) == sum(1 for it in iterations if it["reason"] != "minibatch already perfect")


def test_acceptance_is_strict_improvement_on_the_same_minibatch(workdir):
    _, run_dir, _, _ = search(config(workdir / "run", max_calls=300))
    iterations = lines(run_dir / "iterations.jsonl")
    assert any(it["accepted"] for it in iterations) and any(not it["accepted"] for it in iterations)
    for it in iterations:
        # the fresh minibatch of 3, then up to 6 train rows the parent was already scored on
        assert len(it["parent_minibatch_scores"]) == len(it["minibatch_rows"]) and 3 <= len(it["minibatch_rows"]) <= 9
        if it["child_minibatch_scores"]:
            better = sum(it["child_minibatch_scores"]) > sum(it["parent_minibatch_scores"])
            assert it["accepted"] == (better and it["reason"] == "accepted") or not better
            if not better:
                assert not it["accepted"] and it["reason"] == "not better on minibatch"


def test_front_and_parents(workdir):
    _, run_dir, _, _ = search(config(workdir / "run", max_calls=300))
    candidates = lines(run_dir / "candidates.jsonl")
    frontier = lines(run_dir / "pareto_frontier.jsonl")
    assert [f["valset_row"] for f in frontier] == list(range(10))
    for row in frontier:
        best = max(c["val_scores"][row["valset_row"]] for c in candidates)
        on_front = [c["candidate_idx"] for c in candidates if c["val_scores"][row["valset_row"]] == best]
        assert row["best_score"] == best and [p["candidate_idx"] for p in row["best_prompts"]] == on_front
        assert row["num_best_prompts"] == len(on_front)
    assert (run_dir / "best_prompt.txt").read_text() == (run_dir / "system_prompt.txt").read_text()
    best = max(candidates, key=lambda c: (c["val_mean"], -c["candidate_idx"]))
    assert (run_dir / "best_prompt.txt").read_text() == best["system_prompt"]


@pytest.mark.parametrize("budget", [56, 75, 123, 260])
def test_budget_is_reported_exactly_and_spent_up_to_less_than_one_proposal_and_its_validation(workdir, budget):
    cfg = config(workdir / f"run{budget}", max_calls=budget, parallel_proposals=3)
    outcome, run_dir, student, _ = search(cfg)
    assert outcome.total_metric_calls <= budget
    assert outcome.total_metric_calls > budget - cfg.proposal_cost - cfg.min_validation_cost or outcome.stop_reason
    # the toy task runs out of new things to try: the reflection returns the perfect prompt unchanged
    assert outcome.stop_reason is not None or budget < 260
    assert len(student.client.calls) == outcome.total_metric_calls


def test_budget_below_one_validation_pass_is_a_clear_error(workdir):
    # the parts add up to the minimum: 10 validation rollouts + 6 for a proposal's minibatch + 10 to validate
    with pytest.raises(EnvConfigError, match=r"below the minimum of 26 rollouts.*of 10 rows x 1 rollout\(s\), plus 6 for "
                                             r"one proposal and 10 to validate its child on 10 rows.*at least 26"):
        search(config(workdir / "run", max_calls=12))


def test_truncated_reflection_is_rejected(workdir):
    outcome, run_dir, _, _ = search(config(workdir / "run", max_calls=80),
                                    reflector=support.reflector(support.truncating_reflector))
    iterations = lines(run_dir / "iterations.jsonl")
    assert iterations and all(it["reason"] == "reflection truncated" and not it["accepted"] for it in iterations)
    assert len(outcome.state.candidates) == 1
    # what the reflection model said is kept, so that a user can see why it failed
    assert all(it["reflection_truncated"] and "```" in it["reflection_reply"] for it in iterations)


def test_perfect_minibatches_are_skipped_without_reflection(workdir):
    all_kinds = "\n".join(f"kind {k}" for k in support.KINDS)
    cfg = config(workdir / "run", max_calls=60, perfect_score=1.0, env_args={"system_prompt": all_kinds})
    _, run_dir, _, reflector = search(cfg)
    iterations = lines(run_dir / "iterations.jsonl")
    assert iterations and all(it["reason"] == "minibatch already perfect" for it in iterations)
    assert reflector.client.calls == []


@pytest.mark.parametrize("parallel", [1, 4])
def test_interrupted_and_resumed_run_makes_the_same_choices(workdir, parallel):
    full, full_dir, full_student, _ = search(config(workdir / "full", max_calls=260, parallel_proposals=parallel))

    def interrupt(line):
        if line["iteration"] == 5:
            raise KeyboardInterrupt

    first, part_dir, first_student, _ = search(config(workdir / "part", max_calls=260, parallel_proposals=parallel),
                                               on_commit=interrupt)
    assert first.status == "cancelled"
    assert json.loads((part_dir / "metadata.json").read_text())["status"] == "cancelled"
    assert len(lines(part_dir / "iterations.jsonl")) == 5
    assert len(json.loads((part_dir / "state.json").read_text())["pending"]) == parallel
    resumed, _, resumed_student, _ = search(config(workdir / "part", max_calls=260, parallel_proposals=parallel),
                                            resume=True)
    assert resumed.status == "completed"
    assert without_time(lines(part_dir / "iterations.jsonl")) == without_time(lines(full_dir / "iterations.jsonl"))
    assert lines(part_dir / "candidates.jsonl") == lines(full_dir / "candidates.jsonl")
    assert json.loads((part_dir / "state.json").read_text()) == json.loads((full_dir / "state.json").read_text())
    # rollouts finished before the interrupt came from the cache, not from the model again
    assert len(first_student.client.calls) + len(resumed_student.client.calls) == len(full_student.client.calls)


def test_reflection_failures_stop_the_run_and_keep_what_it_found(workdir):
    outcome, run_dir, _, reflector = search(config(workdir / "run", max_calls=200, parallel_proposals=1),
                                            reflector=support.reflector(support.failing_reflector))
    assert outcome.status == "failed" and "failed 3 times in a row" in outcome.error
    assert len(reflector.client.calls) == 3
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "failed" and meta["num_candidates"] == 1
    assert (run_dir / "best_prompt.txt").read_text() == "Answer the question."


def test_empty_system_prompt_is_optimised_from_empty(workdir):
    outcome, run_dir, _, _ = search(config(workdir / "run", env_args={"system_prompt": ""}))
    candidates = lines(run_dir / "candidates.jsonl")
    assert candidates[0]["system_prompt"] == "" and candidates[0]["val_mean"] == 0.0
    assert outcome.best.val_mean > 0.0
    assert "no system prompt" in (run_dir / "gepa.log").read_text()


def test_env_group_with_one_shared_prompt_is_supported(workdir):
    outcome, _, _, _ = search(config(workdir / "run", env_args={"group": True}))
    assert outcome.status == "completed" and outcome.best.val_mean > outcome.state.candidates[0].val_mean


def test_env_group_with_different_prompts_is_a_clear_error(workdir):
    with pytest.raises(EnvConfigError, match="different system prompts"):
        search(config(workdir / "run", env_args={"group": True, "other_prompt": "Something else."}))


def test_held_out_test_scores(workdir):
    outcome, run_dir, _, _ = search(config(workdir / "run", num_test=10))
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["seed_test_score"] == outcome.seed_test_score < meta["best_test_score"] == outcome.best_test_score
    assert meta["total_metric_calls"] <= 200 + 10


@pytest.mark.parametrize("parallel,speculate", [(1, 1), (1, 3), (3, 2)])
def test_speculation_makes_the_same_choices_and_charges(workdir, parallel, speculate):
    plain, plain_dir, _, plain_reflector = search(config(workdir / "plain", max_calls=260, parallel_proposals=parallel,
                                                         num_test=10))
    fast, fast_dir, student, reflector = search(config(workdir / "fast", max_calls=260, parallel_proposals=parallel,
                                                       num_test=10, speculative_proposals=speculate))
    assert fast.status == plain.status == "completed"
    assert without_time(lines(fast_dir / "iterations.jsonl")) == without_time(lines(plain_dir / "iterations.jsonl"))
    assert lines(fast_dir / "candidates.jsonl") == lines(plain_dir / "candidates.jsonl")
    assert json.loads((fast_dir / "state.json").read_text()) == json.loads((plain_dir / "state.json").read_text())
    assert (fast.total_metric_calls, fast.best_test_score) == (plain.total_metric_calls, plain.best_test_score)
    meta = json.loads((fast_dir / "metadata.json").read_text())["speculation"]
    assert meta["used"] > 0
    # what speculation costs is model calls nobody used, and it says how many
    sent = {(c["messages"][0]["content"] if c["messages"][0]["role"] == "system" else "", c["messages"][-1]["content"])
            for c in student.client.calls}
    repeats = len(confirm_keys(fast_dir))  # only the final pick asks the same thing again, on purpose
    assert len(student.client.calls) == len(sent) + repeats  # still never the same rollout twice
    assert len(student.client.calls) == fast.total_metric_calls + fast.test_metric_calls + meta["rollouts_uncharged"]
    assert len(reflector.client.calls) >= len(plain_reflector.client.calls)


def test_interrupted_speculative_run_resumes_to_the_same_choices(workdir):
    full, full_dir, _, _ = search(config(workdir / "full", max_calls=260))

    def interrupt(line):
        if line["iteration"] == 4:
            raise KeyboardInterrupt

    first, part_dir, _, _ = search(config(workdir / "part", max_calls=260, speculative_proposals=2), on_commit=interrupt)
    assert first.status == "cancelled"
    resumed, _, _, _ = search(config(workdir / "part", max_calls=260, speculative_proposals=2), resume=True)
    assert resumed.status == "completed"
    assert without_time(lines(part_dir / "iterations.jsonl")) == without_time(lines(full_dir / "iterations.jsonl"))
    assert json.loads((part_dir / "state.json").read_text()) == json.loads((full_dir / "state.json").read_text())




def reflection_calls_after_the_stop(run_dir, speculate):
    """A run of the toy task that ends because the reflection model has nothing new left to say, with a slow
    reflection model: how many reflection calls it sent after the commit that ended the search's planning."""
    commits: list[dict] = []
    sent_after: list[int] = []  # for each reflection call: how many commits had been made when it was sent

    class Recording(support.ScriptedClient):
        async def chat(self, messages, **kwargs):
            sent_after.append(len(commits))
            return await super().chat(messages, **kwargs)

    cfg = config(run_dir, max_calls=260, parallel_proposals=3, speculative_proposals=speculate)
    reflector = support.Pool(Recording(support.reflector_reply, delay=0.02), "reflector")
    outcome, _, _, _ = search(cfg, reflector=reflector, on_commit=commits.append)
    state, limit = outcome.state, cfg.max_reflection_failures
    assert outcome.stop_reason is not None and state.fruitless_reflections >= limit
    stopped_at = state.last_committed - (state.fruitless_reflections - limit)  # the commit that exhausted them
    return sum(1 for n in sent_after if n >= stopped_at)


def test_speculation_prefetches_nothing_once_the_reflections_are_exhausted(workdir):
    """After `max_reflection_failures` fruitless reflections in a row the loop plans no more proposals while
    the last ones in flight finish; speculation must not prefetch proposals that will never be made (each
    costs a reflection call: a minute with a small local model). It only moves calls earlier, never adds any
    after the stop."""
    assert reflection_calls_after_the_stop(workdir / "fast", 2) <= reflection_calls_after_the_stop(workdir / "plain", 0)
