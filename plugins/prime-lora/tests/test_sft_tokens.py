"""SFT samples from conversations (orchestrator/sft_tokens.py): the loss mask covers exactly what each assistant
turn adds (content, tool calls, end-of-turn token), on the embedded SmolLM2 tokenizer and a tiny one."""

from __future__ import annotations

import json

import pytest
from sft_tiny import REWRITING_TEMPLATE, TOOLS, tiny_tokenizer  # noqa: E402

from prime_cli.train.plugin_api import Conversation
from prime_lora.orchestrator.sft_tokens import BadRow, conversation_sample


@pytest.fixture(scope="module")
def smollm():
    from transformers import AutoTokenizer

    from prime_cli.train.plugin_api import training_weights

    return AutoTokenizer.from_pretrained(training_weights("local").path)


def trained_spans(tokenizer, sample) -> list[str]:
    """The decoded runs of consecutive loss-mask-1 tokens."""
    spans, current = [], []
    for token, bit in zip(sample["input_ids"], sample["loss_mask"], strict=True):
        if bit:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return [tokenizer.decode(span) for span in spans]


MULTI_TURN = [{"role": "system", "content": "Add numbers."}, {"role": "user", "content": "2+3?"},
              {"role": "assistant", "content": "5"}, {"role": "user", "content": "and 4+4?"},
              {"role": "assistant", "content": "It is 8."}, {"role": "user", "content": "thanks"}]
TOOL_TURNS = [{"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": [
                  {"id": "c0", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
              {"role": "tool", "tool_call_id": "c0", "content": "sunny"},
              {"role": "assistant", "content": "Sunny."}]


@pytest.mark.parametrize("which", ["smollm", "tiny"])
def test_multi_turn_masks_exactly_the_assistant_turns_and_their_end_token(which, request):
    tokenizer = request.getfixturevalue("smollm") if which == "smollm" else tiny_tokenizer()
    end = tokenizer.eos_token
    sample = conversation_sample(tokenizer, Conversation(MULTI_TURN, None, "rows.jsonl line 1"), 512)
    assert trained_spans(tokenizer, sample) == [f"5{end}", f"It is 8.{end}"]
    # the whole sequence is the template's rendering up to the last assistant turn (the trailing user turn dropped)
    rendered = tokenizer.apply_chat_template(MULTI_TURN[:5], tokenize=False)
    assert sample["input_ids"] == tokenizer.encode(rendered, add_special_tokens=False)
    assert sample["inference_logprobs"] == [0.0] * len(sample["input_ids"])
    assert sample["advantage"] == 0.0 and sample["env"] == "sft:rows.jsonl"


@pytest.mark.parametrize("which", ["smollm", "tiny"])
def test_tool_calls_are_trained_and_tool_results_are_not(which, request):
    tokenizer = request.getfixturevalue("smollm") if which == "smollm" else tiny_tokenizer()
    end = tokenizer.eos_token
    sample = conversation_sample(tokenizer, Conversation(TOOL_TURNS, TOOLS, "x"), 1024)
    call, answer = trained_spans(tokenizer, sample)
    assert answer == f"Sunny.{end}"
    assert call.endswith(end) and "weather" in call and '{"city": "Paris"}' in call
    text = tokenizer.decode(sample["input_ids"])
    assert "sunny" in text and "sunny" not in call + answer
    assert json.dumps(TOOLS[0]["function"]["name"]) in text  # the tools reached the template


def test_too_long_no_assistant_and_a_rewriting_template_are_bad_rows(smollm):
    conv = Conversation(MULTI_TURN, None, "x")
    length = len(conversation_sample(smollm, conv, 512)["input_ids"])
    assert len(conversation_sample(smollm, conv, length)["input_ids"]) == length
    with pytest.raises(BadRow, match=rf"^longer than seq_len \({length} tokens\)$") as too_long:
        conversation_sample(smollm, conv, length - 1)
    assert too_long.value.tokens == length
    with pytest.raises(BadRow, match="^no assistant turn$"):
        conversation_sample(smollm, Conversation(MULTI_TURN[:2], None, "x"), 512)
    with pytest.raises(BadRow, match="^the chat template re-renders earlier turns$"):
        conversation_sample(tiny_tokenizer(REWRITING_TEMPLATE), conv, 512)
    # one assistant turn is fine with that template: nothing earlier is re-rendered
    single = conversation_sample(tiny_tokenizer(REWRITING_TEMPLATE), Conversation(MULTI_TURN[:3], None, "x"), 512)
    assert trained_spans(tiny_tokenizer(), single) == ["5<|end|>"]


def test_assistant_turns_of_weight_0_are_context_not_trained():
    tokenizer = tiny_tokenizer()
    few_shot = [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "ba", "weight": 0},
                {"role": "user", "content": "cd"}, {"role": "assistant", "content": "dc"},
                {"role": "user", "content": "ef"}, {"role": "assistant", "content": "fe", "weight": 0}]
    sample = conversation_sample(tokenizer, Conversation(few_shot, None, "x"), 512)
    assert trained_spans(tokenizer, sample) == ["dc<|end|>"]
    assert "ef" not in tokenizer.decode(sample["input_ids"])  # ends with the last trained turn
    assert "ba" in tokenizer.decode(sample["input_ids"])
    with pytest.raises(BadRow, match="^no assistant turn$"):
        conversation_sample(tokenizer, Conversation(few_shot[:2], None, "x"), 512)
