"""The replies `prime env check` scores: the reference (the row's answer written as the parser reads
it) and the adversarial replies a sound rubric must not pay like the reference."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from prime_cli.envs.messages import last_user_text
from prime_cli.envs.parsers import Parser, ThinkParser, XMLParser

PROMPT_TAG = re.compile(r"<([A-Za-z_][A-Za-z0-9_.-]*)>")
PREFIX_CHARS = 3
REPEATS = 30

# kind -> what the verdict calls it
KINDS: dict[str, str] = {
    "reference": "the reference",
    "empty": "an empty reply",
    "other_answer": "another row's answer",
    "unformatted": "the answer without the required format",
    "prefix": f"a {PREFIX_CHARS}-character prefix of the answer",
    "echo": "the prompt echoed back",
    "repetition": f"the answer repeated {REPEATS} times",
}
ADVERSARIAL = [kind for kind in KINDS if kind != "reference"]


@dataclass
class Writer:
    """Writes an answer the way the parser reads it (`how` says which writing was found)."""

    parser: Parser
    prompt_tags: list[str]
    how: str = "as is"

    def write(self, answer: str) -> str:
        return _write(self.parser, answer, self.how)

    def reads_back(self, answer: str) -> bool:
        return reads_back(self.parser, self.write(answer), answer)


def prompt_tags(text: str) -> list[str]:
    """Tag names a prompt asks for (`<name>` written in it), reasoning tags left out."""
    return [t for t in dict.fromkeys(PROMPT_TAG.findall(text or "")) if t != "think"]


def find_writer(parser: Parser, system_prompt: str, answers: list[str]) -> Writer:
    """The first writing of the answers that the parser reads back as the answers: the parser's own
    format for an XMLParser, else the answer as is, in a tag the prompt names, or in \\boxed{}."""
    tags = prompt_tags(system_prompt)
    hows = ["xml"] if isinstance(parser, XMLParser) else []
    hows += ["as is", *(f"tag:{t}" for t in tags), "boxed"]
    sample = [a for a in answers if a.strip()][:5]
    for how in hows:
        writer = Writer(parser, tags, how)
        if sample and all(writer.reads_back(a) for a in sample):
            return writer
    return Writer(parser, tags, hows[0])


def tag_writers(writer: Writer) -> list[Writer]:
    """For a plain Parser (which hands the reward the whole reply, so every writing reads back as is): the
    answer as is and in each tag the prompt names, for the rubric to choose from (`best_paid`)."""
    if type(writer.parser) is not Parser or writer.how != "as is" or not writer.prompt_tags:
        return []
    return [writer, *(Writer(writer.parser, writer.prompt_tags, f"tag:{tag}") for tag in writer.prompt_tags)]


def reads_back(parser: Parser, text: str, answer: str) -> bool:
    try:
        parsed = parser.parse_answer([{"role": "assistant", "content": text}])
    except Exception:
        return False
    return parsed is not None and str(parsed).strip().lower() == str(answer).strip().lower()


def _write(parser: Parser, answer: str, how: str) -> str:
    if how == "xml" and isinstance(parser, XMLParser):
        fields = {name: "Working it out." for name in parser.get_fields()}
        answer_field = parser.answer_field if parser.answer_field in _all_names(parser) else parser.get_fields()[0]
        fields = {k: v for k, v in fields.items() if k != _canonical(parser, answer_field)}
        fields[answer_field] = answer
        text = parser.format(**fields)
    elif how.startswith("tag:"):
        tag = how[4:]
        text = f"<{tag}>{answer}</{tag}>"
    elif how == "boxed":
        text = f"\\boxed{{{answer}}}"
    else:
        text = answer
    if isinstance(parser, ThinkParser):
        text = f"<think>\nWorking it out.\n</think>\n{text}"
    return text


def _all_names(parser: XMLParser) -> list[str]:
    return [name for field in parser._fields for name in field]


def _canonical(parser: XMLParser, name: str) -> str:
    return next((field[0] for field in parser._fields if name in field), name)


def replies_for(rows: list[dict[str, Any]], writer: Writer) -> list[dict[str, str | None]]:
    """Per row, the reply of every kind (None: the kind does not apply to this row)."""
    answers = [str(row.get("answer") or "") for row in rows]
    result = []
    for i, row in enumerate(rows):
        answer = answers[i]
        reference = writer.write(answer)
        others = [a for a in answers[i + 1:] + answers[:i] if a.strip() != answer.strip()]
        echo = last_user_text(row["prompt"]) if isinstance(row["prompt"], list) else str(row["prompt"])
        result.append({
            "reference": reference,
            "empty": "",
            "other_answer": writer.write(others[0]) if others else None,
            "unformatted": answer if answer != reference else None,
            "prefix": writer.write(answer[:PREFIX_CHARS]) if len(answer.strip()) > PREFIX_CHARS else None,
            "echo": echo if echo.strip() and echo.strip() != answer.strip() else None,
            "repetition": writer.write(" ".join([answer] * REPEATS)) if answer.strip() else None,
        })
    return result
