"""The simulated task behind benchmarks/gepa_vs_gepa.py (plain Python: both optimisers' sides import it).

What is simulated (every random choice comes from a draws.Draws: fresh per call, or frozen per request):
- Rows: "[category] word #salt.i" (the tag after the word only makes each row's text unique, so that a run
  repeats: draws.py); the expected answer is the word transformed by the category's rule.
- The student model follows the first instruction of the system prompt about the row's category: the
  category's own instruction (RULES) gives the right answer; a wrong one (another category's sentence
  naming this category, e.g. "Reverse the word for [shout] items.") applies that other rule; none: it
  echoes the word. It also fails NOISE_PERCENT of its calls (sampling noise).
- The reflection model reads the example rows it is shown ("[category] word" with a known word; a copy
  of the prompt among them names no row) and, for each category seen, at rates that do not depend on
  how the reflection prompt is worded:
  * a category the prompt has no instruction about: forgotten (nothing added) FORGET_PERCENT of the
    time; otherwise a wrong instruction is added WRONG_PERCENT of the time, the right one else;
  * a category whose first instruction is wrong: that wrong line is dropped REMOVE_WRONG_PERCENT of the
    time (and the category then handled as one without an instruction), else left as it is.
  It writes one short analysis line, then the new prompt in a ``` block, one instruction a line. The
  scripted server cuts its reply at the reflection max_tokens (in words), like a real server, setting
  finish_reason="length".
- Latency: each student call sleeps STUDENT_DELAY, each reflection call REFLECTION_DELAY.
Both optimisers talk to the same scripted server, with the same rows and the same sampling args.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable

from draws import Draws

STUDENT_DELAY = 0.2
REFLECTION_DELAY = 1.5
NOISE_PERCENT = 8
FORGET_PERCENT = 20
WRONG_PERCENT = 15
REMOVE_WRONG_PERCENT = 50
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
# every sentence about a category: its own rule's (right) and every other rule's, naming it (wrong)
ABOUT: dict[str, dict[str, Callable[[str], str]]] = {
    c: {sentence.replace(f"[{d}]", f"[{c}]"): rule for d, (sentence, rule) in RULES.items()} for c in RULES}
ROW = re.compile(r"\[(\w+)\] (\w+)")


def make_rows(count: int, salt: int) -> list[dict[str, str]]:
    pool = [c for c, w in WEIGHTS.items() for _ in range(w)]
    rows = []
    for i in range(count):
        h = zlib.crc32(f"{salt}:{i}".encode())
        category = pool[h % len(pool)]
        word = WORDS[(h // len(pool)) % len(WORDS)]
        # the tag makes every question unique: a fresh draw is keyed by the request's text and how often it
        # was asked, so two rows of one text asked at once would swap draws by arrival order
        rows.append({"question": f"[{category}] {word} #{salt}.{i}", "answer": RULES[category][1](word)})
    return rows


def system_of(messages: list[dict]) -> str:
    return str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""


def first_instruction(prompt: str, category: str) -> str | None:
    """The sentence the student follows for a category: the first one about it in the prompt."""
    present = [s for s in ABOUT[category] if s in prompt]
    return min(present, key=prompt.find) if present else None


def student_answer(system: str, question: str, draws: Draws) -> str:
    match = ROW.match(question.strip())
    if not match or match.group(1) not in RULES:
        return "?"
    category, word = match.groups()
    if draws.chance(NOISE_PERCENT, system, question):
        return word[::-1] + "?"
    sentence = first_instruction(system, category)
    return ABOUT[category][sentence](word) if sentence else word


def current_prompt(text: str) -> str:
    match = re.search(r"```\n(.*?)\n```", text, re.S)
    return match.group(1).strip() if match else ""


def shown_part(text: str) -> str:
    """Everything after the current prompt block: the examples."""
    return text[text.find("```", text.find("```") + 3) + 3:]


def seen_categories(shown: str) -> list[str]:
    return list(dict.fromkeys(c for c, w in ROW.findall(shown) if c in RULES and w in WORDS))


def edit_rules(text: str, prompt: str, shown: str, draws: Draws) -> tuple[list[str], list[str], list[str]]:
    """The reflection's edits of category instructions: (lines dropped, lines added, categories missed)."""
    dropped, added, missed = [], [], []
    for category in seen_categories(shown):
        sentence = first_instruction(prompt, category)
        if sentence == RULES[category][0]:
            continue
        if sentence is not None:
            if not draws.chance(REMOVE_WRONG_PERCENT, text, f"remove-wrong:{category}"):
                continue
            dropped += [s for s in ABOUT[category] if s in prompt and s != RULES[category][0]]
        missed.append(category)
        if draws.chance(FORGET_PERCENT, text, f"forget:{category}"):
            continue
        if draws.chance(WRONG_PERCENT, text, f"wrong:{category}"):
            wrong = [s for s in ABOUT[category] if s != RULES[category][0]]
            added.append(draws.pick(wrong, text, f"wrong-pick:{category}"))
        else:
            added.append(RULES[category][0])
    return dropped, added, missed


def reply_block(analysis: str, prompt: str, dropped: list[str], added: list[str]) -> str:
    kept = [line for line in prompt.splitlines() if not any(s in line for s in dropped)]
    new_prompt = "\n".join([*kept, *added]).strip()
    return f"{analysis}\n```\n{new_prompt}\n```"


def reflection_reply(text: str, draws: Draws) -> str:
    prompt = current_prompt(text)
    dropped, added, missed = edit_rules(text, prompt, shown_part(text), draws)
    analysis = "The assistant missed the rules for: " + (", ".join(missed) or "nothing new") + "."
    return reply_block(analysis, prompt, dropped, added)


def scripted_models(student: Callable[[str, str, Draws], str],
                    reflector: Callable[[str, Draws], str]) -> Callable[[Draws], Callable[[dict], str]]:
    """A family's scripted server from its student and reflector: the reply function for a request to model
    "student" or "reflector" (each call sleeps this module's STUDENT_DELAY / REFLECTION_DELAY as set then)."""
    def make_reply(draws: Draws) -> Callable[[dict], str]:
        def reply(body: dict) -> str:
            messages = body.get("messages") or []
            if body.get("model") == "reflector":
                time.sleep(REFLECTION_DELAY)
                return reflector(str(messages[-1].get("content") or ""), draws)
            time.sleep(STUDENT_DELAY)
            return student(system_of(messages), str(messages[-1].get("content") or ""), draws)
        return reply
    return make_reply


make_reply = scripted_models(student_answer, reflection_reply)
