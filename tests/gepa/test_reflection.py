"""Reflection records, the reflection prompt, and how replies are accepted or rejected."""

from prime_cli.gepa.reflection import parse_reply, reflection_prompt, rollout_record

STATE = {
    "prompt": [{"role": "system", "content": "SYS"}, {"role": "user", "content": "reverse: abc"}],
    "completion": [{"role": "assistant", "content": "<r>cab</r>"}],
    "answer": "cba", "reward": 0.4, "metrics": {"lcs": 0.66, "format": 1.0},
    "error": {"type": "ToolCallError", "message": "tool exploded"},
    "metrics_errors": [{"func": "judge", "type": "ValueError", "message": "bad"}],
    "stop_condition": "max_turns_reached", "is_truncated": True, "turn": 3, "secret_column": "x",
}


def test_record_carries_everything_the_reflection_needs():
    record = rollout_record(STATE, ["turn"])
    assert "reverse: abc" in record["input"] and "<r>cab</r>" in record["completion"]
    # the rollout errored: no reward (never a 0), the error is its feedback
    assert record["answer"] == "cba" and record["reward"] is None
    assert rollout_record({**STATE, "error": None}, [])["reward"] == 0.4
    assert record["metrics"] == {"lcs": 0.66, "format": 1.0}
    assert record["error"]["type"] == "ToolCallError" and record["stop_condition"] == "max_turns_reached"
    assert record["state"] == {"turn": 3}
    text = reflection_prompt("Current prompt.", [record], ["lcs", "format"])
    for needle in ("Current prompt.", "reverse: abc", "<r>cab</r>", "cba", "lcs=0.66", "format=1",
                   "ToolCallError: tool exploded", "Metric judge failed", "max_turns_reached", "token limit",
                   "### turn", "Metrics measured: lcs, format", "### Reward: none (the attempt ended in the error"):
        assert needle in text, needle
    assert "secret_column" not in text and "Reward: 0" not in text
    scored = reflection_prompt("Current prompt.", [rollout_record({**STATE, "error": None}, [])], [])
    assert "### Reward: 0.4" in scored and "### Error" not in scored


def test_new_prompt_is_the_last_closed_fenced_block():
    reply = "Old:\n```\nold prompt\n```\nNew:\n```text\nline one\nline two\n```\n"
    proposal = parse_reply(reply, "stop")
    assert proposal.prompt == "line one\nline two" and proposal.reason == "proposed"


def test_a_reply_cut_at_the_token_limit_after_a_closed_block_keeps_that_block():
    # small reflection models often close the prompt's block and then ramble on to the limit
    proposal = parse_reply("New:\n```\ncomplete prompt\n```\nWhy this works: it is clear and", "length")
    assert proposal.prompt == "complete prompt" and proposal.reason == "proposed" and proposal.truncated


def test_truncated_unclosed_missing_and_empty_replies_are_rejected():
    assert parse_reply("```\nhalf a prompt", "length").reason == "reflection truncated"
    assert parse_reply("no block at all, cut", "length").reason == "reflection truncated"
    assert not parse_reply("```\ncomplete\n```", "stop").truncated
    assert parse_reply("Here:\n```\nhalf a prompt", "stop").reason == "reflection has an unclosed ``` block"
    assert parse_reply("just prose", "stop").reason == "reflection has no ``` block"
    assert parse_reply("```\n   \n```", "stop").reason == "reflection proposed an empty prompt"
    assert parse_reply(None, "stop").prompt is None
