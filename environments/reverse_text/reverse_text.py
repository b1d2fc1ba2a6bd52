"""reverse-text: reverse a sentence character by character.

Single turn. The model answers inside <reversed_text> tags; the reward is the longest common
subsequence of its answer and the true reversal over the longer of the two (`length_aware_lcs`:
partial credit, but a fragment earns only its share and rambling loses in proportion), plus a small
format reward. With `plain_text` it answers with the reversed text alone (after two worked
examples) and the whole reply is scored the same way. Sentences are generated offline with Faker from a seed; `dataset_name`
loads a Hugging Face dataset with a `prompt` or `text` column instead (needs `datasets`).
"""

from __future__ import annotations

from typing import Any

import prime_cli.envs as vf

SYSTEM_PROMPT = (
    "Reverse the text you are given character by character, so the last character comes first. "
    "Reply with only the reversed text inside <reversed_text> and </reversed_text> tags."
)
PLAIN_SYSTEM_PROMPT = (
    "Reverse the text you are given character by character, so the last character comes first. "
    "Reply with only the reversed text: no tags, no quotes, no explanation."
)
# two worked examples as earlier chat turns: with them SmolLM2-135M answers in reversal-like text
# (2-3 characters a token; the true reversal ~2) rather than in English prose (~4.5), so a policy
# that learns the answer's length in characters keeps most of its tokens (no collapse to a few)
PLAIN_FEW_SHOT = [
    {"role": "user", "content": "Big cats sleep all day."},
    {"role": "assistant", "content": ".yad lla peels stac giB"},
    {"role": "user", "content": "Open the window please."},
    {"role": "assistant", "content": ".esaelp wodniw eht nepO"},
]


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for char_a in a:
        current = [0]
        for j, char_b in enumerate(b):
            current.append(previous[j] + 1 if char_a == char_b else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def lcs_ratio(a: str, b: str) -> float:
    """2 * LCS / (len(a) + len(b)): 1.0 for equal strings, 0.0 when nothing is shared."""
    if not a and not b:
        return 1.0
    return 2.0 * lcs_length(a, b) / (len(a) + len(b))


def length_aware_lcs(reply: str, answer: str) -> float:
    """LCS / max(len(reply), len(answer)): 1.0 only for the exact answer, and at most
    len(reply) / len(answer) for a shorter reply (a fragment of the answer earns its share only),
    at most len(answer) / len(reply) for a longer one. The reward of every mode: `lcs_ratio`, the
    reward before, pays a 3-character prefix about twice its share, and RL on it taught a small
    policy to answer short (`prime env check reverse-text` said so)."""
    if not reply and not answer:
        return 1.0
    return lcs_length(reply, answer) / max(len(reply), len(answer))


def generated_sentences(count: int, seed: int, min_words: int, max_words: int) -> list[str]:
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(seed)
    sentences: list[str] = []
    seen: set[str] = set()
    while len(sentences) < count:
        sentence = fake.sentence(nb_words=fake.random_int(min_words, max_words), variable_nb_words=False)
        if sentence not in seen:
            seen.add(sentence)
            sentences.append(sentence)
    return sentences


def hub_texts(dataset_name: str, split: str) -> list[str]:
    try:
        from datasets import load_dataset
    except ImportError:
        raise vf.EnvConfigError(
            "dataset_name needs the `datasets` package: pip install 'reverse-text[hub]'"
        ) from None
    data = load_dataset(dataset_name, split=split)
    column = "prompt" if "prompt" in data.column_names else "text"
    return [str(t) for t in data[column]]


def completion_text(completion: vf.Messages) -> str:
    if isinstance(completion, str):
        return completion
    replies = [m for m in completion if m.get("role") == "assistant"]
    return str(replies[-1].get("content") or "") if replies else ""


def tagged_rubric(parser: vf.XMLParser, format_weight: float, answer_without_tags: bool) -> vf.Rubric:
    def lcs_reward(completion, answer, parser) -> float:
        """LCS of the parsed answer and the true reversal, over the longer of the two."""
        parsed = parser.parse_answer(completion)
        if parsed is None and answer_without_tags:
            parsed = completion_text(completion).strip()
        return length_aware_lcs(parsed or "", answer)

    return vf.Rubric(funcs=[lcs_reward, parser.get_format_reward_func()], weights=[1.0, format_weight], parser=parser)


def rows_for(texts: list[str]) -> list[dict[str, Any]]:
    return [{"question": text, "answer": text[::-1]} for text in texts]


def load_environment(
    num_train_examples: int = 1000,
    num_eval_examples: int = 100,
    seed: int = 0,
    min_words: int = 2,
    max_words: int = 5,
    system_prompt: str | None = None,
    dataset_name: str | None = None,
    format_weight: float = 0.2,
    answer_without_tags: bool = False,
    plain_text: bool = False,
) -> vf.Environment:
    """Reverse-text environment.

    Args:
        num_train_examples: generated training sentences.
        num_eval_examples: generated evaluation sentences (from a different seed than training).
        seed: seed of the sentence generator.
        min_words / max_words: sentence length range in words.
        system_prompt: the instruction given to the model (GEPA optimises it). Default: one that asks
            for the tags, or with `plain_text` for the reversed text alone.
        dataset_name: a Hugging Face dataset to use instead of generated text (train and test splits).
        format_weight: weight of the <reversed_text> format reward.
        answer_without_tags: score the whole reply when it has no <reversed_text> tags (instead of
            0). Small models rarely use the tags; this gives them partial credit to learn from
            (SmolLM2-135M: mean 0.09-0.13, within-group std 0.03 at temperature 1).
        plain_text: ask for the reversed text alone (no tags; the prompt shows two worked examples
            as earlier turns) and score the whole reply with `length_aware_lcs`; no format reward
            (format_weight and answer_without_tags do not apply). For RL on small models
            (configs/rl/reverse-text-cpu.toml; SmolLM2-135M, 8-12 words, 48 tokens: mean 0.26,
            within-group std 0.04 at temperature 1).
    """
    if min_words < 1 or max_words < min_words:
        raise vf.EnvConfigError(f"need 1 <= min_words <= max_words (got {min_words} and {max_words})")
    if plain_text:
        def reversal_reward(completion, answer) -> float:
            """LCS of the whole reply and the true reversal, over the longer of the two."""
            return length_aware_lcs(completion_text(completion).strip(), answer)

        rubric = vf.Rubric(funcs=[reversal_reward], weights=[1.0])
        system_prompt = PLAIN_SYSTEM_PROMPT if system_prompt is None else system_prompt
        parser: vf.Parser = vf.Parser()
        few_shot = PLAIN_FEW_SHOT
    else:
        parser = vf.XMLParser(["reversed_text"], answer_field="reversed_text")
        rubric = tagged_rubric(parser, format_weight, answer_without_tags)
        system_prompt = SYSTEM_PROMPT if system_prompt is None else system_prompt
        few_shot = None

    if dataset_name:
        train = lambda: rows_for(hub_texts(dataset_name, "train")[:num_train_examples])  # noqa: E731
        evaluation = lambda: rows_for(hub_texts(dataset_name, "test")[:num_eval_examples])  # noqa: E731
    else:
        train = lambda: rows_for(generated_sentences(num_train_examples, seed, min_words, max_words))  # noqa: E731
        evaluation = lambda: rows_for(generated_sentences(num_eval_examples, seed + 1_000_003, min_words, max_words))  # noqa: E731
    return vf.SingleTurnEnv(
        dataset=train, eval_dataset=evaluation, system_prompt=system_prompt, few_shot=few_shot, parser=parser,
        rubric=rubric
    )
