"""reverse-text as a verifiers.v1 taskset: the verifiers 0.4.0 side of benchmarks/eval_throughput.py.

    vf-eval vf1-reverse-text --env.taskset.num-examples 200 -n 200 -r 4 \
        --env.agent.harness.id null --env.agent.runtime.type subprocess --no-push

Equal work per rollout to prime's environments/reverse_text: the same system prompt, the same
Faker-generated evaluation sentences (same seed offset and word range), one chat call, an LCS-ratio
reward plus a 0.2-weighted format reward (one well-formed <reversed_text> pair per assistant reply).
"""

from __future__ import annotations

import re

import verifiers.v1 as vf
from faker import Faker
from verifiers.v1.types import content_text

SYSTEM_PROMPT = (
    "Reverse the text you are given character by character, so the last character comes first. "
    "Reply with only the reversed text inside <reversed_text> and </reversed_text> tags."
)
EVAL_SEED_OFFSET = 1_000_003  # prime's reverse-text draws its eval split from seed + this
ANSWER = re.compile(r"<reversed_text>\s*(.*?)\s*</reversed_text>", re.S)


def sentences(count: int, seed: int, min_words: int = 2, max_words: int = 5) -> list[str]:
    """`count` distinct Faker sentences of min..max words, in generation order."""
    fake = Faker("en_US")
    fake.seed_instance(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        text = fake.sentence(nb_words=fake.random_int(min_words, max_words), variable_nb_words=False)
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


def replies(trace: vf.Trace) -> list[str]:
    return [content_text(m.content) for m in trace.messages if m.role == "assistant"]


class ReverseTextData(vf.TaskData):
    answer: str = ""


class ReverseTextTask(vf.Task[ReverseTextData]):
    @vf.reward(weight=1.0)
    async def lcs_reward(self, trace: vf.Trace) -> float:
        texts = replies(trace)
        found = ANSWER.search(texts[-1]) if texts else None
        return lcs_ratio(found.group(1) if found else "", self.data.answer)

    @vf.reward(weight=0.2)
    async def format_reward(self, trace: vf.Trace) -> float:
        texts = [t for t in replies(trace) if t.strip()]
        ok = [t.count("<reversed_text>") == 1 and t.count("</reversed_text>") == 1 and ANSWER.search(t) is not None
              for t in texts]
        return sum(ok) / len(ok) if ok else 0.0


class ReverseTextConfig(vf.TasksetConfig):
    num_examples: int = 100
    """How many evaluation sentences to generate."""
    seed: int = 0


class ReverseTextTaskset(vf.Taskset[ReverseTextTask, ReverseTextConfig]):
    def load(self) -> list[ReverseTextTask]:
        texts = sentences(self.config.num_examples, self.config.seed + EVAL_SEED_OFFSET)
        return [ReverseTextTask(ReverseTextData(prompt=t, system_prompt=SYSTEM_PROMPT, answer=t[::-1]), self.config.task)
                for t in texts]


__all__ = ["ReverseTextTaskset"]
