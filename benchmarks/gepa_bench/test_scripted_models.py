"""Checks of the scripted models of benchmarks/gepa_vs_gepa.py (not in `make test`'s paths; run:
.venv/bin/pytest benchmarks/gepa_bench/test_scripted_models.py -q -p no:cacheprovider)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim  # noqa: E402
import sim_edit  # noqa: E402
import sim_format  # noqa: E402
from draws import Draws  # noqa: E402
from families import FAMILIES  # noqa: E402

RIGHT = "\n".join(sentence for sentence, _ in sim.RULES.values())
TRIALS = 2000


@pytest.fixture(autouse=True)
def no_delay(monkeypatch):
    monkeypatch.setattr(sim, "STUDENT_DELAY", 0.0)
    monkeypatch.setattr(sim, "REFLECTION_DELAY", 0.0)


def reflection_text(prompt: str, examples: str) -> str:
    return f"Current instruction:\n```\n{prompt}\n```\nExamples:\n{examples}"


def student_body(system: str, question: str) -> dict:
    return {"model": "student", "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}


def noisy_share(noise: str) -> float:
    reply = FAMILIES["sim"].server_reply(noise, 0)
    answers = [reply(student_body(RIGHT, "[mirror] apple")) for _ in range(TRIALS)]
    return sum(a != "elppa" for a in answers) / TRIALS


def test_fresh_noise_answers_the_same_request_afresh_at_the_stated_rate():
    assert noisy_share("fresh") == pytest.approx(sim.NOISE_PERCENT / 100, abs=0.025)


def test_frozen_noise_answers_the_same_request_the_same_way():
    assert noisy_share("frozen") in (0.0, 1.0)


def test_the_same_seed_starts_prime_and_gepa_from_the_same_draws():
    first, second = (FAMILIES["sim"].server_reply("fresh", 3) for _ in range(2))
    questions = [f"[mirror] {word}" for word in sim.WORDS] * 5
    assert [first(student_body(RIGHT, q)) for q in questions] == [second(student_body(RIGHT, q)) for q in questions]


def test_fresh_draws_do_not_depend_on_the_order_requests_arrive_in():
    keys = [(f"prompt {i % 3}", f"row {i % 5}") for i in range(60)]
    forward, backward = Draws("fresh", "order"), Draws("fresh", "order")
    drawn = [forward.chance(50, *key) for key in keys]
    redrawn = [backward.chance(50, *key) for key in reversed(keys)][::-1]
    # the n-th asking of each key gets the same draw; the same key asked again draws afresh
    per_key: dict = {}
    for key, value in zip(keys, drawn, strict=True):
        per_key.setdefault(key, []).append(value)
    per_key_again: dict = {}
    for key, value in zip(keys, redrawn, strict=True):
        per_key_again.setdefault(key, []).append(value)
    assert {k: sorted(v) for k, v in per_key.items()} == {k: sorted(v) for k, v in per_key_again.items()}
    assert any(len(set(values)) > 1 for values in per_key.values())
    other_seed = Draws("fresh", "other seed")
    assert [other_seed.chance(50, *key) for key in keys] != drawn


def removal_rate(examples: str) -> float:
    prompt = f"{sim.RULES['shout'][0]}\n{sim_edit.PLANTED}"
    draws = Draws("fresh", "rates")
    text = reflection_text(prompt, examples)
    return sum(sim_edit.PLANTED not in sim.current_prompt(sim_edit.reflection_reply(text, draws))
               for _ in range(TRIALS)) / TRIALS


def test_edit_removes_a_harmful_instruction_at_one_rate_whether_or_not_the_prompt_names_it():
    unnamed = removal_rate("[shout] apple -> apple (expected APPLE)")
    named = removal_rate(f"[shout] apple -> apple (expected APPLE); made worse by: {sim_edit.PLANTED}")
    expected = sim_edit.REMOVE_HARMFUL_PERCENT / 100
    assert unnamed == pytest.approx(expected, abs=0.04)
    assert named == pytest.approx(expected, abs=0.04)


def test_sim_reflector_forgets_and_proposes_wrong_rules_at_the_stated_rates():
    draws = Draws("fresh", "rates")
    text = reflection_text(sim.SEED_PROMPT, "[mirror] apple -> apple")
    outcomes = [sim.first_instruction(sim.current_prompt(sim.reflection_reply(text, draws)), "mirror")
                for _ in range(TRIALS)]
    forgot = outcomes.count(None) / TRIALS
    wrong = sum(o not in (None, sim.RULES["mirror"][0]) for o in outcomes) / TRIALS
    assert forgot == pytest.approx(sim.FORGET_PERCENT / 100, abs=0.03)
    assert wrong == pytest.approx((1 - sim.FORGET_PERCENT / 100) * sim.WRONG_PERCENT / 100, abs=0.03)


def test_the_student_follows_the_first_instruction_about_a_category(monkeypatch):
    monkeypatch.setattr(sim, "NOISE_PERCENT", 0)
    wrong, never = "Write [mirror] items in uppercase.", Draws("frozen", "x")
    assert sim.student_answer(f"{wrong}\n{sim.RULES['mirror'][0]}", "[mirror] apple", never) == "APPLE"
    assert sim.student_answer(f"{sim.RULES['mirror'][0]}\n{wrong}", "[mirror] apple", never) == "elppa"
    assert sim.student_answer("", "[mirror] apple", never) == "apple"


def test_format_family_scores_nothing_without_the_format_rule(monkeypatch):
    monkeypatch.setattr(sim, "NOISE_PERCENT", 0)
    never = Draws("frozen", "x")
    rule = sim.RULES["mirror"][0]
    answer = sim_format.FORMATS[sim_format.FORMAT]("elppa")
    assert sim_format.student_answer(rule, "[mirror] apple", never) == "elppa"
    assert sim_format.student_answer(f"{sim_format.FORMAT}\n{rule}", "[mirror] apple", never) == answer
    wrong_first = f"{next(iter(sim_format.WRONG_FORMATS))}\n{sim_format.FORMAT}\n{rule}"
    assert sim_format.student_answer(wrong_first, "[mirror] apple", never) != answer
    assert all(row["answer"].startswith("<a>") for row in sim_format.make_rows(20, 7))


def test_unknown_noise_kind_is_refused():
    with pytest.raises(ValueError, match="noise must be one of"):
        Draws("warm", "x")
