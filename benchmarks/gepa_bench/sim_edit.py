"""Task family "edit" of benchmarks/gepa_vs_gepa.py: a task that needs instructions both added and removed.

It reuses the rows, rules and words of family "sim" (sim.py) and adds harmful instructions: sentences
that sound like sensible output rules but break some categories. Plain Python: both optimisers' sides
import it; it lives only here (no default config or test fixture of the project uses it).

What is simulated (every random choice comes from a draws.Draws: fresh per call, or frozen per request):
- Rows: as in sim.make_rows, with other salts (environment gepa-sim-edit), so the rows differ.
- Seed prompt: the sim's seed line plus one planted harmful instruction, "Answer in lowercase."
- Harmful instructions (HARMFUL), each applied to the student's answer after the category rule:
  lowercase (breaks shout, title), collapsing a repeated character (breaks double and words such as
  apple), cutting to 6 characters (breaks double, dash, long words), dropping digits (breaks count).
- The student: as in sim (the first instruction about the row's category, sim.NOISE_PERCENT noise),
  then every harmful instruction in the system prompt, in prompt order.
- The reflection model. The current prompt is the first ``` block; the examples are everything after it.
  * Category instructions: as in sim (forgotten, wrong and dropped at sim's stated rates).
  * Adding harm: in ADD_HARMFUL_PERCENT of reflections, ONE harmful instruction the prompt lacks (a
    plausible but wrong generalisation).
  * Removing harm: a harmful instruction M of the current prompt has "evidence against it" when the
    examples hold a row "[c] w" whose category rule is in the prompt and M changes that rule's answer
    (M demonstrably breaks the row). With evidence, the reflector drops M's line REMOVE_HARMFUL_PERCENT
    of the time, whatever the reflection prompt names (before issue 57 it was 25% when M's sentence was
    absent from the examples and 90% when the reflection prompt named it next to the evidence, which
    rewarded one way of writing that prompt rather than the search).
  * Reply: one analysis line, then the new prompt in a ``` block, one instruction a line; the scripted
    server cuts it at max_tokens words, as for sim.
- Latency: sim.STUDENT_DELAY and sim.REFLECTION_DELAY (one setting for every family).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sim
from draws import Draws

PLANTED = "Answer in lowercase."
SEED_PROMPT = f"{sim.SEED_PROMPT}\n{PLANTED}"
ROW_SALTS = (101, 102)  # family sim's environment uses 1 and 2
ADD_HARMFUL_PERCENT = 30
REMOVE_HARMFUL_PERCENT = 50

HARMFUL: dict[str, Callable[[str], str]] = {
    PLANTED: lambda s: s.lower(),
    "Never write the same letter twice in a row.": lambda s: re.sub(r"(.)\1+", r"\1", s),
    "Keep every answer under seven characters.": lambda s: s[:6],
    "Answer without digits.": lambda s: re.sub(r"\d", "", s),
}


def make_rows(count: int, salt: int) -> list[dict[str, str]]:
    return sim.make_rows(count, salt)


def harmful_in(prompt: str) -> list[str]:
    """The harmful instructions a prompt holds, in the order they appear in it."""
    return sorted((m for m in HARMFUL if m in prompt), key=prompt.find)


def student_answer(system: str, question: str, draws: Draws) -> str:
    answer = sim.student_answer(system, question, draws)
    for instruction in harmful_in(system):
        answer = HARMFUL[instruction](answer)
    return answer


def _evidence_against(instruction: str, prompt: str, shown: str) -> bool:
    for category, word in sim.ROW.findall(shown):
        if category in sim.RULES and word in sim.WORDS and sim.RULES[category][0] in prompt:
            right = sim.RULES[category][1](word)
            if HARMFUL[instruction](right) != right:
                return True
    return False


def reflection_reply(text: str, draws: Draws) -> str:
    prompt = sim.current_prompt(text)
    shown = sim.shown_part(text)
    removed = [m for m in harmful_in(prompt)
               if _evidence_against(m, prompt, shown) and draws.chance(REMOVE_HARMFUL_PERCENT, text, f"remove:{m}")]
    dropped, added, missed = sim.edit_rules(text, prompt, shown, draws)
    absent = [m for m in HARMFUL if m not in prompt]
    if absent and draws.chance(ADD_HARMFUL_PERCENT, text, "add-harmful"):
        added.append(draws.pick(absent, text, "pick-harmful"))
    analysis = ("The assistant missed the rules for: " + (", ".join(missed) or "nothing new") + "."
                + (" These instructions broke correct answers: " + " ".join(removed) if removed else ""))
    kept = "\n".join(line for line in prompt.splitlines() if line.strip() not in removed)
    return sim.reply_block(analysis, kept, dropped, added)


make_reply = sim.scripted_models(student_answer, reflection_reply)
