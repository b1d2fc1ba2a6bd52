"""How a reflection prompt is shortened to fit the reflection model's context (fitting.py)."""

from prime_cli.gepa.context_window import TEMPLATE_TOKENS, ContextWindow
from prime_cli.gepa.fitting import Shortening, fitted_reflection, ladder, need_order
from prime_cli.gepa.reflection import cut, cut_transcript, reflection_prompt

TOOL_OUTPUT = "line of a long tool output\n" * 400
TRANSCRIPT = "\n".join(["[system] PROMPT", "[user] solve it", "[assistant] call the tool",
                        f"[tool] {TOOL_OUTPUT}", "[assistant] the answer is 42"])


def record(i: int, text: str = TRANSCRIPT) -> dict:
    return {"input": f"[system] PROMPT\n[user] question {i}", "completion": text, "answer": f"answer {i}",
            "reward": 0.25, "metrics": {"exact": 0.0}, "error": None, "metrics_errors": [],
            "stop_condition": "max_turns_reached", "is_truncated": False}


def test_a_long_tool_output_loses_its_middle_and_the_turns_around_it_stay():
    text = cut_transcript(TRANSCRIPT, 600, prompt="PROMPT")
    assert len(text) < 800 and "chars cut]" in text
    assert "[user] solve it" in text and "[assistant] call the tool" in text and "the answer is 42" in text
    assert text.startswith("[system] (the current system prompt, shown above)")
    assert cut("short", 10) == "short" and cut_transcript(TRANSCRIPT, None) == TRANSCRIPT


def test_the_ladder_cuts_fields_then_leaves_out_examples_then_cuts_the_rest_shorter():
    steps = ladder(5, 2)
    assert steps[0] == Shortening(None, 5) and steps[-1] == Shortening(120, 2)
    assert [s.shown for s in steps] == [5, 5, 5, 4, 3, 2, 2, 2, 2]
    # the first rollout of each fresh minibatch row first, then the others in their order
    assert need_order(rows=3, rollouts_per_row=2, fresh=2, total=8) == [0, 2, 1, 3, 4, 5, 6, 7]


def test_the_fitted_prompt_fits_and_keeps_the_prompt_rewards_and_the_minibatch_rows():
    records = [record(i) for i in range(6)]
    whole = reflection_prompt("PROMPT", records, ["exact"])
    window = ContextWindow("m", 2048, 300)
    assert not window.fits(whole)
    fitted = fitted_reflection("PROMPT", records, ["exact"], need_order(6, 1, 3, 6), 3, window)
    assert fitted.text is not None and window.tokens(fitted.text) <= 2048 - 300
    assert fitted.step.shown >= 3 and "PROMPT" in fitted.text
    for i in range(3):
        assert f"question {i}" in fitted.text and f"answer {i}" in fitted.text
    assert fitted.text.count("### Reward: 0.25") == fitted.step.shown and "### Metrics: exact=0" in fitted.text
    # unknown context: the whole prompt, as before
    assert fitted_reflection("PROMPT", records, ["exact"], list(range(6)), 3, ContextWindow("m", None, 300)).text == whole


def test_even_the_shortest_may_not_fit():
    fitted = fitted_reflection("PROMPT " * 400, [record(0)], [], [0], 1, ContextWindow("m", 1024, 300))
    assert fitted.text is None and fitted.tokens > 1024 - 300


def test_a_refusal_teaches_the_limit_and_a_denser_count():
    window = ContextWindow("m", None, 300)
    text = "word " * 1000
    message = ("This model's maximum context length is 2048 tokens. However, your prompt contains at least 2049 "
               "input tokens, which exceeds this limit even without any output tokens.")
    assert window.learn(text, message) and window.context == 2048
    assert window.tokens(text) > 2049 - TEMPLATE_TOKENS  # counted more than before: the server counted more
    assert not ContextWindow("m", None, 300).learn(text, "prompt is too long")  # nothing to go by
