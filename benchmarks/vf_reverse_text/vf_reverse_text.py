"""reverse-text for verifiers: the anchor side of benchmarks/eval_throughput.py.

Equal work per rollout to prime's environments/reverse_text: the same system prompt, the same
Faker-generated evaluation sentences (same seed and word range), one chat call, an LCS-ratio reward
plus a 0.2-weighted format reward from XMLParser(["reversed_text"]).
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset
from faker import Faker

SYSTEM_PROMPT = (
    "Reverse the text you are given character by character, so the last character comes first. "
    "Reply with only the reversed text inside <reversed_text> and </reversed_text> tags."
)
EVAL_SEED_OFFSET = 1_000_003  # prime's reverse-text draws its eval split from seed + this


def sentences(count: int, seed: int, min_words: int = 2, max_words: int = 5) -> list[str]:
    """`count` distinct Faker sentences of min..max words, in generation order."""
    fake = Faker("en_US")
    fake.seed_instance(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        words = fake.random_int(min_words, max_words)
        text = fake.sentence(nb_words=words, variable_nb_words=False)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def lcs_ratio(a: str, b: str) -> float:
    """2 * longest-common-subsequence / (len(a) + len(b)); 1.0 for two empty strings."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    row = [0] * (len(b) + 1)
    for ca in a:
        nxt = [0]
        for j, cb in enumerate(b):
            nxt.append(row[j] + 1 if ca == cb else max(row[j + 1], nxt[j]))
        row = nxt
    return 2.0 * row[-1] / (len(a) + len(b))


def load_environment(num_examples: int = 100, seed: int = 0, format_weight: float = 0.2) -> vf.Environment:
    parser = vf.XMLParser(["reversed_text"], answer_field="reversed_text")

    def lcs_reward(completion, answer, **kwargs) -> float:
        return lcs_ratio(parser.parse_answer(completion) or "", answer)

    rubric = vf.Rubric(funcs=[lcs_reward, parser.get_format_reward_func()],
                       weights=[1.0, format_weight], parser=parser)
    texts = sentences(num_examples, seed + EVAL_SEED_OFFSET)
    rows = [{"question": t, "answer": t[::-1]} for t in texts]
    return vf.SingleTurnEnv(eval_dataset=Dataset.from_list(rows), system_prompt=SYSTEM_PROMPT,
                            parser=parser, rubric=rubric)
