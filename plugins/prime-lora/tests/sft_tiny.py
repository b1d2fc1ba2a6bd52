"""A tiny chat tokenizer for SFT tests: one token per printable character, a template with tool calls."""

from __future__ import annotations

import string

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
