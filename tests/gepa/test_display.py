"""GEPA's displays where they once drifted from the eval's: strict NDJSON, a terminated final panel."""

import io
import json

from rich.console import Console

from prime_cli.gepa.display import JsonDisplay, RichDisplay

START = dict(env_id="toy", model="m", reflector="r", max_calls=100, run_dir="runs/g", used=0, seed_rollouts=0)


def iteration(score: float) -> dict:
    return {"line": {"iteration": 1, "parent_idx": 0, "accepted": False, "reason": "not better on minibatch",
                     "child_idx": None, "parent_minibatch_scores": [score]},
            "used": 10, "max_calls": 100, "best_score": score, "best_idx": 0, "seed_score": score, "candidates": 1,
            "in_flight": 0}


def test_json_events_stay_strict_json_when_a_score_is_not_a_number():
    out = io.StringIO()
    with JsonDisplay(out) as display:
        display.start(**START)
        display.update(**iteration(float("nan")))

    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    events = [json.loads(line, parse_constant=reject) for line in out.getvalue().splitlines()]
    assert events[-1]["best_score"] is None and events[-1]["parent_minibatch_scores"] == [None]


def test_the_live_panel_ends_its_line_on_a_console_that_is_not_a_terminal():
    out = io.StringIO()
    with RichDisplay(Console(file=out, width=100, force_terminal=False)) as display:
        display.start(**START)
        display.update(**iteration(0.5))
    assert out.getvalue().endswith("╯\n")  # what is printed next starts on a line of its own


def test_the_seed_line_counts_only_charged_rollouts_against_the_budget():
    """While the seed is validated, the first proposals' minibatch rollouts run too: they are charged when their
    proposal commits, so they are shown in flight, not as budget spent (the test set is never charged)."""
    from prime_cli.gepa.display import PlainDisplay

    out = io.StringIO()
    with PlainDisplay(out) as display:
        display.start(**{**START, "max_calls": 60, "seed_rollouts": 30})
        for split in ["train", "val", "train", "test", "train"]:
            display.rollout_done({"split": split, "reward": 1.0})
        line = display.seed_line()
    assert "validating the seed prompt: 1/30 rollouts" in line and "budget 1/60 charged, 3 in flight" in line
    assert display.progress()["used"] == 1 and display.progress()["in_flight_rollouts"] == 3
