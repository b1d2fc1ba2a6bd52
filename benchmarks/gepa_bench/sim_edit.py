"""Task family "edit" of benchmarks/gepa_vs_gepa.py: a task that needs instructions both added and removed.

It reuses the rows, rules and words of family "sim" (sim.py) and adds harmful instructions: sentences
that sound like sensible output rules but break some categories. Plain Python: both optimisers' sides
import it; it lives only here (no default config or test fixture of the project uses it).

What is simulated:
- Rows: as in sim.make_rows, with other salts (environment gepa-sim-edit), so the rows differ.
- Seed prompt: the sim's seed line plus one planted harmful instruction, "Answer in lowercase."
- Harmful instructions (HARMFUL), each applied to the student's answer after the category rule:
  lowercase (breaks shout, title), collapsing a repeated character (breaks double and words such as
  apple), cutting to 6 characters (breaks double, dash, long words), dropping digits (breaks count).
- The student: as in sim (the category rule when its exact instruction is in the system prompt, else
  the word; 8% hash noise), then every harmful instruction in the system prompt, in prompt order.
- The reflection model (deterministic: each "random" choice is a crc32 of the reflection text and a
  label, as in sim). The current prompt is the first ``` block; the examples are everything after it.
  * Adding: the rule of every category seen in the examples that the prompt lacks (as in sim); and, in
    30% of reflections, ONE harmful instruction the prompt lacks (a plausible but wrong generalisation).
  * Removing (the assumption this family rests on): a harmful instruction M of the current prompt has
    "evidence against it" when the examples hold a row "[c] w" whose category rule is in the prompt and
    M changes that rule's answer (M demonstrably breaks the row). With evidence, the reflector drops M's
    line with probability 25% when M's sentence does not appear in the examples (the reflection saw only
    outputs and failures, and must guess which line caused them), and with probability 90% when it does
    (the reflection prompt named that instruction next to the evidence, e.g. a list of instructions with
    the rows each made worse). This is the sim's model of a reflection LLM: it acts on an instruction it
    is shown evidence against, far more reliably when the instruction is named next to the evidence.
    A verbatim copy of the current prompt among the examples (prime shows each example's system
    message) does not name anything, so such copies are taken out before looking for M's sentence.
  * Reply: one analysis line, then the new prompt in a ``` block, one instruction a line; the scripted
    server cuts it at max_tokens words, as for sim.
- Latency: sim.STUDENT_DELAY and sim.REFLECTION_DELAY (one setting for both families).
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable

import sim

PLANTED = "Answer in lowercase."
SEED_PROMPT = f"{sim.SEED_PROMPT}\n{PLANTED}"
ROW_SALTS = (101, 102)  # family sim's environment uses 1 and 2
ADD_HARMFUL_PERCENT = 30
REMOVE_UNNAMED_PERCENT = 25
REMOVE_NAMED_PERCENT = 90

HARMFUL: dict[str, Callable[[str], str]] = {
    PLANTED: lambda s: s.lower(),
    "Never write the same letter twice in a row.": lambda s: re.sub(r"(.)\1+", r"\1", s),
    "Keep every answer under seven characters.": lambda s: s[:6],
    "Answer without digits.": lambda s: re.sub(r"\d", "", s),
}
ROW = re.compile(r"\[(\w+)\] (\w+)")


def make_rows(count: int, salt: int) -> list[dict[str, str]]:
    return sim.make_rows(count, salt)


def harmful_in(prompt: str) -> list[str]:
    """The harmful instructions a prompt holds, in the order they appear in it."""
    return sorted((m for m in HARMFUL if m in prompt), key=prompt.find)


def student_answer(system: str, question: str) -> str:
    answer = sim.student_answer(system, question)
    for instruction in harmful_in(system):
        answer = HARMFUL[instruction](answer)
    return answer


def _chance(text: str, label: str, percent: int) -> bool:
    return zlib.crc32(f"{text}\x00{label}".encode()) % 100 < percent


def _evidence_against(instruction: str, prompt: str, shown: str) -> bool:
    for category, word in ROW.findall(shown):
        if category in sim.RULES and word in sim.WORDS and sim.RULES[category][0] in prompt:
            right = sim.RULES[category][1](word)
            if HARMFUL[instruction](right) != right:
                return True
    return False


def reflection_reply(text: str) -> str:
    prompt = sim.current_prompt(text)
    shown = text[text.find("```", text.find("```") + 3) + 3:]  # everything after the current prompt block
    named = shown.replace(prompt, "") if prompt else shown
    removed = []
    for instruction in harmful_in(prompt):
        if _evidence_against(instruction, prompt, shown):
            percent = REMOVE_NAMED_PERCENT if instruction in named else REMOVE_UNNAMED_PERCENT
            if _chance(text, f"remove:{instruction}", percent):
                removed.append(instruction)
    seen = list(dict.fromkeys(re.findall(r"\[(\w+)\]", shown)))
    missing = [c for c in seen if c in sim.RULES and sim.RULES[c][0] not in prompt]
    added = [sim.RULES[c][0] for c in missing]
    absent = [m for m in HARMFUL if m not in prompt]
    if absent and _chance(text, "add-harmful", ADD_HARMFUL_PERCENT):
        added.append(absent[zlib.crc32(f"{text}\x00pick-harmful".encode()) % len(absent)])
    kept = [line for line in prompt.splitlines() if line.strip() not in removed]
    analysis = ("The assistant missed the rules for: " + (", ".join(missing) or "nothing new") + "."
                + (" These instructions broke correct answers: " + " ".join(removed) if removed else ""))
    new_prompt = "\n".join([*kept, *added]).strip()
    return f"{analysis}\n```\n{new_prompt}\n```"


def server_reply(body: dict) -> str:
    """The scripted server's reply function for this family: model "student" or "reflector"."""
    messages = body.get("messages") or []
    if body.get("model") == "reflector":
        time.sleep(sim.REFLECTION_DELAY)
        return reflection_reply(str(messages[-1].get("content") or ""))
    time.sleep(sim.STUDENT_DELAY)
    system = str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""
    return student_answer(system, str(messages[-1].get("content") or ""))
