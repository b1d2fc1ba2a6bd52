"""Task family "format" of benchmarks/gepa_vs_gepa.py: one format rule every answer needs, plus the content rules.

Its structure differs from "one instruction per category": a single instruction gates every row (without
the right one, no answer scores), and the content rules only pay once it is there. Plain Python: both
optimisers' sides import it; it lives only here (no default config or test fixture of the project uses it).

What is simulated (every random choice comes from a draws.Draws: fresh per call, or frozen per request):
- Rows: as in sim.make_rows, with other salts (environment gepa-sim-format); the expected answer is the
  transformed word wrapped in <a>...</a>.
- Seed prompt: the sim's seed line (no format rule: the seed scores 0).
- The student: the content answer as in sim (first instruction about the category, sim.NOISE_PERCENT
  noise), then the first format instruction of the system prompt (FORMAT, or one of WRONG_FORMATS, which
  wrap it otherwise); with none it answers bare.
- The reflection model: category instructions as in sim; and for the format, once it is shown any
  example row, at sim's stated rates whatever the reflection prompt names: with no format instruction,
  it forgets it sim.FORGET_PERCENT of the time, else adds a wrong one sim.WRONG_PERCENT of the time and
  the right one otherwise; with a wrong one first, it drops the wrong lines sim.REMOVE_WRONG_PERCENT of
  the time (and then proceeds as with none). Reply and max_tokens cut as in sim.
- Latency: sim.STUDENT_DELAY and sim.REFLECTION_DELAY.
"""

from __future__ import annotations

from collections.abc import Callable

import sim
from draws import Draws

ROW_SALTS = (201, 202)  # family sim's environment uses 1 and 2, edit's 101 and 102
FORMAT = "Wrap every answer in <a> and </a>."
WRONG_FORMATS: dict[str, Callable[[str], str]] = {
    "Wrap every answer in double quotes.": lambda s: f'"{s}"',
    "Wrap every answer in <answer> and </answer>.": lambda s: f"<answer>{s}</answer>",
    "End every answer with a period.": lambda s: s + ".",
}
FORMATS: dict[str, Callable[[str], str]] = {FORMAT: lambda s: f"<a>{s}</a>", **WRONG_FORMATS}
SEED_PROMPT = sim.SEED_PROMPT


def make_rows(count: int, salt: int) -> list[dict[str, str]]:
    return [{**row, "answer": FORMATS[FORMAT](row["answer"])} for row in sim.make_rows(count, salt)]


def first_format(prompt: str) -> str | None:
    present = [f for f in FORMATS if f in prompt]
    return min(present, key=prompt.find) if present else None


def student_answer(system: str, question: str, draws: Draws) -> str:
    answer = sim.student_answer(system, question, draws)
    form = first_format(system)
    return FORMATS[form](answer) if form else answer


def edit_format(text: str, prompt: str, draws: Draws) -> tuple[list[str], list[str]]:
    """The reflection's edits of the format instruction: (lines dropped, lines added)."""
    form = first_format(prompt)
    if form == FORMAT:
        return [], []
    dropped = []
    if form is not None:
        if not draws.chance(sim.REMOVE_WRONG_PERCENT, text, "remove-wrong:format"):
            return [], []
        dropped = [f for f in WRONG_FORMATS if f in prompt]
    if draws.chance(sim.FORGET_PERCENT, text, "forget:format"):
        return dropped, []
    if draws.chance(sim.WRONG_PERCENT, text, "wrong:format"):
        return dropped, [draws.pick(list(WRONG_FORMATS), text, "wrong-pick:format")]
    return dropped, [FORMAT]


def reflection_reply(text: str, draws: Draws) -> str:
    prompt = sim.current_prompt(text)
    shown = sim.shown_part(text)
    dropped, added, missed = sim.edit_rules(text, prompt, shown, draws)
    if sim.seen_categories(shown):
        format_dropped, format_added = edit_format(text, prompt, draws)
        dropped, added = dropped + format_dropped, format_added + added
    analysis = "The assistant missed the rules for: " + (", ".join(missed) or "nothing new") + "."
    return sim.reply_block(analysis, prompt, dropped, added)


make_reply = sim.scripted_models(student_answer, reflection_reply)
