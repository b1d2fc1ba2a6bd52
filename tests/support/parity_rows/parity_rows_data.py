"""A few local rows in place of the Hugging Face datasets the verifiers parity environments ask for.

Imported by this folder's sitecustomize.py (in the prime process and in the vf-eval process alike) and by
tests/support/parity_server.py (the scripted policy looks answers up here). The v1 fixtures (a60a606) ask for
three of these names too: reverse_text (PrimeIntellect/Reverse-Text-RL, train), gsm8k (openai/gsm8k, "main",
test) and alphabet_sort (kalomaze/alphabetic-arxiv-authors-it1, train). Nothing is downloaded:
`hub_rows(name, config, split)` answers the names below and raises for any other one.

GSM8K rows are the first 12 of each split of /work/shared/data/gsm8k (MIT, see GSM8K_LICENSE); the other
rows are written here (names, paragraphs and problems made up for these tests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

FIRST = ["Ada", "Bruno", "Celia", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kira",
         "Lars", "Mina", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera"]
LAST = ["Zorn", "Yates", "Xu", "Weber", "Vance", "Ueda", "Tamm", "Sato", "Rhee", "Quist", "Pohl",
        "Olsen", "Nagy", "Moro", "Lund", "Kahn", "Iyer", "Haas", "Gale", "Frey", "Egan", "Dorn"]

PLACES = ["Alder", "Brenn", "Corvo", "Dunmere", "Elsing", "Fallow"]
SENTENCES = [
    "The town of {p} lies on the northern bank of a slow river that floods every second spring",
    "Its first houses were built by millers who used the river to turn four wooden wheels",
    "A stone bridge with seven arches was added a century later and still carries the main road",
    "The market square holds a fair each autumn where farmers sell apples, wool and honey",
    "Local records describe a great fire that destroyed the old granary and most of the archive",
    "After the fire the council rebuilt the granary in brick and moved the archive to the church",
    "Today the town is known for its orchards, its music school and a small museum of milling",
    "Visitors often walk the river path to the ruined mill, which is about an hour upstream",
]


def paragraph(i: int) -> str:
    place = PLACES[i % len(PLACES)]
    order = SENTENCES[i % 3:] + SENTENCES[:i % 3]
    return ". ".join(s.format(p=place) for s in order) + "."


def gsm8k_raw(split: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (HERE / "gsm8k_rows.jsonl").read_text().splitlines() if line.strip()]
    return [{"question": r["question"], "answer": r["answer"]} for r in rows if r["split"] == split]


def math_raw(count: int = 1000) -> list[dict[str, Any]]:
    """competition_math-shaped rows (problem, solution with a boxed answer), half sums, half fractions."""
    rows = []
    for i in range(count):
        a, b = 3 + i % 17, 2 + (i * 7) % 13
        if i % 2 == 0:
            rows.append({"problem": f"Compute ${a} + {b}$.", "solution": f"We add: $\\boxed{{{a + b}}}$.",
                         "level": "Level 1", "type": "Algebra"})
        else:
            rows.append({"problem": f"Write $\\frac{{{a}}}{{{2 * a}}}$ in lowest terms.",
                         "solution": "Dividing both by the numerator gives $\\boxed{\\frac{1}{2}}$.",
                         "level": "Level 1", "type": "Prealgebra"})
    return rows


def example_rows(name: str, split: str | None) -> list[dict[str, Any]]:
    """What verifiers' load_example_dataset(name, split) returns for these names: question and answer."""
    if name == "gsm8k":
        base = [{"question": r["question"], "answer": r["answer"].split("####")[1].strip()}
                for r in gsm8k_raw(split or "test")]
        return [base[i % len(base)] for i in range(1000 if (split or "test") == "train" else len(base))]
    if name == "math":
        return [{"question": r["problem"], "answer": r["solution"].split("\\boxed{", 1)[1].rsplit("}", 1)[0]}
                for r in math_raw()]
    raise KeyError(f"parity rows: no local rows for load_example_dataset({name!r})")


def mmmu_raw() -> list[dict[str, Any]]:
    from PIL import Image

    rows = []
    for i in range(6):
        colour = ["red", "green", "blue", "yellow", "black", "white"][i]
        options = ["red", "green", "blue", "yellow"] if i < 4 else ["black", "grey", "white", "brown"]
        rgb = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
               "black": (0, 0, 0), "white": (255, 255, 255)}[colour]
        rows.append({"id": f"dev_Art_{i + 1}", "question": f"Painting {i + 1}: which colour fills <image 1>?",
                     "options": repr(options), "answer": "ABCD"[options.index(colour)],
                     "image_1": Image.new("RGB", (8, 8), rgb)})
    return rows


def hub_rows(name: str, config: str | None = None, split: str | None = None) -> list[dict[str, Any]]:
    if name == "openai/gsm8k":
        return gsm8k_raw(split or "test")
    if name == "chiayewken/competition_math":
        return math_raw()
    if name == "kalomaze/alphabetic-arxiv-authors-it1":
        return [{"names": [f"{FIRST[(i * 5 + k) % len(FIRST)]} {LAST[(i * 3 + k * 7) % len(LAST)]}" for k in range(15)]}
                for i in range(8)]
    if name == "agentlans/wikipedia-paragraphs":
        return [{"text": paragraph(i)} for i in range(6)]
    if name == "PrimeIntellect/Reverse-Text-RL":
        return [{"prompt": text} for text in ["a quiet river", "Seven stone arches.", "honey, wool and apples",
                                               "The mill is upstream", "orchards in autumn", "brick granary"]]
    if name == "PrimeIntellect/Hendrycks-Math":
        return [{"question": f"What is {a} times {b}?", "answer": str(a * b)} for a, b in
                [(3, 4), (6, 7), (12, 5), (9, 9), (11, 3), (8, 15)]]
    if name == "google/civil_comments":
        texts = [("What a lovely walk along the river this morning.", 0.0), ("You are an idiot and nobody likes you.", 0.9),
                 ("The council meeting ran long but was useful.", 0.1), ("Shut up, you worthless fool.", 0.8),
                 ("Thanks for fixing the bridge so quickly!", 0.0), ("This article is dull but accurate.", 0.2)]
        return [{"text": t, "toxicity": s, "severe_toxicity": 0.0, "obscene": 0.0, "threat": 0.0,
                 "insult": s, "identity_attack": 0.0, "sexual_explicit": 0.0} for t, s in texts]
    if name == "MMMU/MMMU":
        return mmmu_raw()
    raise KeyError(f"parity rows: no local rows for load_dataset({name!r}, {config!r}, split={split!r}); "
                   "nothing is downloaded in this test")
