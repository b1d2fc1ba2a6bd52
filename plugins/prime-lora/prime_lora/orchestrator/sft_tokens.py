"""A conversation -> one SFT training sample: its tokens as the model's chat template renders them (with the
conversation's tools), the loss mask 1 on exactly the tokens each assistant turn adds.

Chat templates such as SmolLM2's ChatML have no `{% generation %}` markers, so transformers' assistant mask
is not used. The conversation is rendered turn by turn instead: what messages[:i+1] adds to messages[:i] with
the generation prompt (the assistant header, which vLLM's prompt holds too) is assistant turn i's content, tool
calls and end-of-turn token; the newline a template writes after that token is not trained (the model stops
at the token). Each render must extend the one before in tokens, else the sample would train on tokens no
prefix ever had: such a conversation is a bad row.
"""

from __future__ import annotations

from typing import Any

from prime_cli.train.plugin_api import Conversation, TrainingSample


class BadRow(Exception):
    """A conversation that cannot be trained on: the reason it is counted under; `tokens`, the row's length when
    it was longer than seq_len (a caller may count those rows together)."""

    def __init__(self, reason: str, tokens: int | None = None):
        super().__init__(reason)
        self.tokens = tokens

    @property
    def reason(self) -> str:
        return str(self)


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, generation_prompt: bool) -> list[int]:
    try:
        text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=generation_prompt,
                                             tokenize=False)
    except Exception as exc:  # noqa: BLE001 - a template's own raise_exception (roles must alternate, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BadRow(f"refused by the chat template ({first})") from None
    return list(tokenizer.encode(text, add_special_tokens=False))


def _extends(longer: list[int], prefix: list[int]) -> bool:
    return len(longer) >= len(prefix) and longer[: len(prefix)] == prefix


def conversation_sample(tokenizer: Any, conv: Conversation, seq_len: int, env: str | None = None) -> TrainingSample:
    """The sample of `conv` (up to its last trained assistant turn). Raises BadRow: "no assistant turn",
    "longer than seq_len (N tokens)", "the chat template re-renders earlier turns", a template's refusal."""
    messages = conv.messages
    # assistant turns of weight 0 (OpenAI's fine-tuning format: few-shot examples) are context, not trained
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("weight", 1) != 0]
    if not turns:
        raise BadRow("no assistant turn")
    if turns[0] == 0:
        raise BadRow("an assistant turn before any prompt")
    messages = messages[: turns[-1] + 1]  # later messages train nothing
    full = _render(tokenizer, messages, conv.tools, False)
    if len(full) > seq_len:
        raise BadRow(f"longer than seq_len ({len(full)} tokens)", len(full))
    ends = {tokenizer.eos_token_id} - {None}  # the end-of-turn token: the last one of a turn is trained
    mask = [0] * len(full)
    for i in turns:
        start = len(prompt := _render(tokenizer, messages[:i], conv.tools, True))
        with_turn = _render(tokenizer, messages[: i + 1], conv.tools, False)
        if not _extends(full, prompt) or not _extends(with_turn, prompt) or not _extends(full, with_turn):
            raise BadRow("the chat template re-renders earlier turns")
        end = len(with_turn)
        last_end = max((j for j in range(start, end) if full[j] in ends), default=None)
        if last_end is not None:
            end = last_end + 1
        mask[start:end] = [1] * (end - start)
    if not any(mask):
        raise BadRow("no assistant tokens")
    return {"input_ids": full, "loss_mask": mask, "inference_logprobs": [0.0] * len(full), "truncated": False,
            "advantage": 0.0, "reward": 0.0, "env": env or f"sft:{conv.origin.split(' ')[0]}",
            "example_id": conv.origin, "policy_step": 0}
