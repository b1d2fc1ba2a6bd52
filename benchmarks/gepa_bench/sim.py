"""The simulated task behind benchmarks/gepa_vs_gepa.py (plain Python: both optimisers' sides import it).

What is simulated:
- Rows: "[category] word"; the expected answer is the word transformed by the category's rule.
- The student model follows a category's rule only when the system prompt contains that rule's
  instruction; otherwise it echoes the word. It also fails ~8% of (prompt, row) pairs at random
  (a fixed hash, so the same request always gets the same answer): sampling noise.
- The reflection model reads the examples it is shown, and adds the instruction of every category
  it sees that the current prompt lacks (one short analysis line first). The scripted server cuts
  its reply at the reflection max_tokens (in words), like a real server, setting
  finish_reason="length".
- Latency: each student call sleeps STUDENT_DELAY, each reflection call REFLECTION_DELAY.
Both optimisers talk to the same scripted server, with the same rows and the same sampling args.
"""

from __future__ import annotations

import re
import time
import zlib

STUDENT_DELAY = 0.2
REFLECTION_DELAY = 1.5
NOISE_PERCENT = 8
SEED_PROMPT = "Answer with the transformed word only."

RULES = {
    "mirror": ("Reverse the word for [mirror] items.", lambda w: w[::-1]),
    "shout": ("Write [shout] items in uppercase.", lambda w: w.upper()),
    "double": ("Repeat [double] items twice with no space.", lambda w: w + w),
    "sort": ("Sort the letters of [sort] items alphabetically.", lambda w: "".join(sorted(w))),
    "strip": ("Remove the vowels from [strip] items.", lambda w: re.sub("[aeiou]", "", w)),
    "first": ("Give only the first letter of [first] items.", lambda w: w[0]),
    "last": ("Give only the last letter of [last] items.", lambda w: w[-1]),
    "count": ("Give the letter count of [count] items as digits.", lambda w: str(len(w))),
    "title": ("Capitalise the first letter of [title] items.", lambda w: w.capitalize()),
    "dash": ("Put a dash between letters of [dash] items.", lambda w: "-".join(w)),
}
# how often each category occurs: a few common ones, a long tail (so the order of discovery matters)
WEIGHTS = {"mirror": 8, "shout": 7, "double": 6, "sort": 5, "strip": 4, "first": 3, "last": 3, "count": 2,
           "title": 2, "dash": 1}
WORDS = ("apple river stone cloud maple tiger orbit lemon pixel candle violet harbor quartz meadow falcon "
         "copper silver walnut ember glacier lantern marble nectar oyster pepper raven saddle timber velvet "
         "willow").split()


def make_rows(count: int, salt: int) -> list[dict[str, str]]:
    pool = [c for c, w in WEIGHTS.items() for _ in range(w)]
    rows = []
    for i in range(count):
        h = zlib.crc32(f"{salt}:{i}".encode())
        category = pool[h % len(pool)]
        word = WORDS[(h // len(pool)) % len(WORDS)]
        rows.append({"question": f"[{category}] {word}", "answer": RULES[category][1](word)})
    return rows


def _system(messages: list[dict]) -> str:
    return str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""


def student_answer(system: str, question: str) -> str:
    match = re.match(r"\[(\w+)\] (\w+)", question.strip())
    if not match:
        return "?"
    category, word = match.groups()
    if zlib.crc32(f"{system}\x00{question}".encode()) % 100 < NOISE_PERCENT:
        return word[::-1] + "?"
    instruction = RULES[category][0]
    return RULES[category][1](word) if instruction in system else word


def current_prompt(text: str) -> str:
    match = re.search(r"```\n(.*?)\n```", text, re.S)
    return match.group(1).strip() if match else ""


def reflection_reply(text: str) -> str:
    prompt = current_prompt(text)
    shown = text[text.find("```", text.find("```") + 3) + 3:]  # everything after the current prompt block
    seen = list(dict.fromkeys(re.findall(r"\[(\w+)\]", shown)))
    missing = [c for c in seen if c in RULES and RULES[c][0] not in prompt]
    analysis = "The assistant missed the rules for: " + (", ".join(missing) or "nothing new") + "."
    new_prompt = "\n".join([prompt, *(RULES[c][0] for c in missing)]).strip()
    return f"{analysis}\n```\n{new_prompt}\n```"


def server_reply(body: dict) -> str:
    """The scripted server's reply function: model "student" or "reflector"."""
    messages = body.get("messages") or []
    if body.get("model") == "reflector":
        time.sleep(REFLECTION_DELAY)
        return reflection_reply(str(messages[-1].get("content") or ""))
    time.sleep(STUDENT_DELAY)
    return student_answer(_system(messages), str(messages[-1].get("content") or ""))
