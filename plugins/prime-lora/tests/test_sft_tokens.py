"""SFT samples from conversations (orchestrator/sft_tokens.py): the loss mask covers exactly what each assistant
turn adds (content, tool calls, end-of-turn token), on the embedded SmolLM2 tokenizer and a tiny one."""

from __future__ import annotations

import json
import string

import pytest

from prime_cli.train.plugin_api import Conversation
from prime_lora.orchestrator.sft_tokens import BadRow, conversation_sample

TINY_TEMPLATE = (
    "{%- if tools %}<|start|>tools<|sep|>{{ tools | tojson }}<|end|>{% endif -%}"
    "{%- for m in messages -%}<|start|>{{ m.role }}<|sep|>{{ m.content }}"
    "{%- for c in m.tool_calls or [] %}<call>{{ c.function.name }}({{ c.function.arguments }})</call>{%- endfor %}"
    "<|end|>{%- endfor -%}{%- if add_generation_prompt %}<|start|>assistant<|sep|>{% endif -%}")
# Qwen3-like: an earlier assistant turn is rendered shorter than when it was the last one
REWRITING_TEMPLATE = TINY_TEMPLATE.replace("{{ m.content }}",
                                           "{% if m.role == 'assistant' and not loop.last %}(old){% else %}{{ m.content }}{% endif %}")
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]


def tiny_tokenizer(template: str = TINY_TEMPLATE):
    """One token per printable character, three special tokens; `<|end|>` ends a turn (eos)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<unk>", *string.printable])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens(["<|start|>", "<|sep|>", "<|end|>"])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|end|>", unk_token="<unk>")
    fast.chat_template = template
    return fast


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
    with pytest.raises(BadRow, match=rf"^longer than seq_len \({length} tokens\)$"):
        conversation_sample(smollm, conv, length - 1)
    with pytest.raises(BadRow, match="^no assistant turn$"):
        conversation_sample(smollm, Conversation(MULTI_TURN[:2], None, "x"), 512)
    with pytest.raises(BadRow, match="^the chat template re-renders earlier turns$"):
        conversation_sample(tiny_tokenizer(REWRITING_TEMPLATE), conv, 512)
    # one assistant turn is fine with that template: nothing earlier is re-rendered
    single = conversation_sample(tiny_tokenizer(REWRITING_TEMPLATE), Conversation(MULTI_TURN[:3], None, "x"), 512)
    assert trained_spans(tiny_tokenizer(), single) == ["5<|end|>"]
