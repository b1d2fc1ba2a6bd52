"""HotpotQA's answer metrics: exact match and token F1 after normalisation.

Normalisation: lower case, punctuation removed, the articles a/an/the removed, whitespace
collapsed. When either side is yes, no or noanswer, F1 needs an exact match.
"""

from __future__ import annotations

import re
import string
from collections import Counter

ARTICLES = re.compile(r"\b(a|an|the)\b")
SPECIAL = {"yes", "no", "noanswer"}
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    text = ARTICLES.sub(" ", text.lower().translate(PUNCTUATION))
    return " ".join(text.split())


def exact_match(prediction: str, reference: str) -> float:
    return 1.0 if normalize(prediction) == normalize(reference) else 0.0


def token_f1(prediction: str, reference: str) -> float:
    guess, gold = normalize(prediction), normalize(reference)
    if (guess in SPECIAL or gold in SPECIAL) and guess != gold:
        return 0.0
    guess_tokens, gold_tokens = guess.split(), gold.split()
    common = sum((Counter(guess_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(guess_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)
