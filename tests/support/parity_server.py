"""The scripted policy of the verifiers parity test: a deterministic, mostly competent player.

`parity_reply(request)` is a `reply` for tests.support.scripted_server.ScriptedOpenAIServer. It reads only
the messages (or the completion prompt) and the offered tools, never sampling arguments, so prime and
vf-eval get the same reply for the same conversation. It looks answers up in the local rows
(tests/support/parity_rows/parity_rows_data.py), follows the format the system prompt asks for, calls
tools first when tools are offered, and answers judge prompts with a grade or a score. About a third of
the examples (chosen by a checksum of the example's first user message) get a wrong or badly formatted
reply on purpose, so that rewards are not all 1.

    python -m tests.support.parity_server --port 8765     (standalone, for trying environments by hand)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import threading
import zlib
from functools import cache
from pathlib import Path
from typing import Any

from tests.support.scripted_server import ScriptedOpenAIServer, content_text

sys.path.insert(0, str(Path(__file__).resolve().parent / "parity_rows"))
import parity_rows_data as rows  # noqa: E402

ORDINALS = ["first", "second", "third", "fourth", "fifth"]


def flawed(text: str) -> int:
    """0 for about a third of the examples (the wrong-on-purpose ones), else 1 or 2."""
    return zlib.crc32(text.encode("utf-8")) % 3


@cache
def answers() -> dict[str, str]:
    table = {}
    for name, split in (("gsm8k", "train"), ("gsm8k", "test"), ("math", "train")):
        table.update({r["question"]: r["answer"] for r in rows.example_rows(name, split)})
    table.update({r["question"]: r["answer"] for r in rows.hub_rows("PrimeIntellect/Hendrycks-Math")})
    return table


@cache
def toxic_texts() -> dict[str, bool]:
    return {r["text"]: r["toxicity"] >= 0.5 for r in rows.hub_rows("google/civil_comments")}


@cache
def mmmu_answers() -> dict[str, str]:
    return {r["question"]: r["answer"] for r in rows.mmmu_raw()}


def first_name(name: str) -> str:
    cut = next((i for i in range(1, len(name)) if name[i].isupper()), len(name))
    return name[:cut]


def last_name(name: str) -> str:
    cut = next((i for i in range(1, len(name)) if name[i].isupper()), len(name))
    return name[cut:]


def tool_reply(messages: list[dict], tools: list[dict]) -> str | dict[str, Any]:
    if any(m.get("role") == "tool" for m in messages):
        return "All the tools have been called."
    user = content_text(next(m for m in reversed(messages) if m.get("role") == "user").get("content"))
    schemas = {t["function"]["name"]: t["function"] for t in tools if t.get("type") == "function"}
    wanted = [n for n in re.findall(r"'(\w+)'", user) if n in schemas] or list(schemas)[:1]
    if flawed(user) == 0:  # one tool short, or the wrong one
        wanted = wanted[:-1] if len(wanted) > 1 else [n for n in schemas if n not in wanted][:1]
    samples = {"integer": 2, "number": 1.5, "string": "a", "boolean": True}
    calls = []
    for i, name in enumerate(wanted):
        params = schemas[name].get("parameters", {}).get("properties", {})
        args = {p: samples.get(spec.get("type"), "a") for p, spec in params.items()}
        calls.append({"id": f"call_{i}", "function": {"name": name, "arguments": json.dumps(args)}})
    return {"content": None, "tool_calls": calls}


def alphabet_reply(users: list[str], turn: int) -> str:
    seen: list[list[str]] = []
    by_first = "by FIRST name" in users[0]
    for text in users[: turn + 1]:
        found = re.search(r"by (?:FIRST|LAST) name: ([^\n]*)", text)
        seen.append([n.strip() for n in found.group(1).split(",")] if found else [])
    names = sorted((n for turn_names in seen for n in turn_names), key=first_name if by_first else last_name)
    if flawed(users[0]) == 0:
        names.reverse()
    if turn == 0:
        return "<alphabetical_sorted>\n" + "\n".join(names) + "\n</alphabetical_sorted>"
    lines = [f"{n} // new name!" if n in seen[turn] else n for n in names]
    return "<combined_alphabetical_sorted>\n" + "\n".join(lines) + "\n</combined_alphabetical_sorted>"


def sentence_reply(users: list[str], turn: int) -> str:
    found = re.search(r'paragraph:\n\n"(.*)"\n\n', users[0], re.DOTALL)
    sentences = (found.group(1) if found else "").replace('." ', '". ').split(". ")[:5]
    ordinal = next((o for o in ORDINALS if f" {o} sentence" in users[turn]), "first")
    sentence = sentences[ORDINALS.index(ordinal)] if len(sentences) == 5 else ""
    # not an empty reply: verifiers 0.2.0 ends a rollout on one (reward 0), prime scores it
    if turn == 4 and flawed(found.group(1) if found else "") == 0:
        return "I do not remember that one."
    if turn < 3:
        return f'The {ordinal} sentence of the paragraph is: "{sentence}"'
    return f"The {ordinal} sentence of the paragraph is: {sentence}"


def math_reply(question: str, xml: bool) -> str:
    answer = answers().get(question.strip())
    if answer is None:
        return "I cannot solve this one."
    kind = flawed(question)
    if kind == 0:  # wrong on purpose
        answer = str(int(answer) + 1) if answer.lstrip("-").isdigit() else "\\frac{1}{3}"
    elif kind == 1 and answer == "\\frac{1}{2}":
        answer = "0.5"  # right, in another form: math-verify says equal, a string match says not
    if xml:
        return f"<reasoning>\nWorked it out step by step.\n</reasoning>\n<answer>\n\\boxed{{{answer}}}\n</answer>"
    return f"Working step by step, the result is \\boxed{{{answer}}}."


def judge_reply(prompt: str) -> str | None:
    if "Evaluate this base model continuation" in prompt:
        # graded on the continuation alone (verifiers 0.2.0 leaves <prefix> empty for a text prompt)
        continuation = prompt.split("<model_continuation>", 1)[-1].split("</model_continuation>", 1)[0].strip()
        grade = "ABCF"[sum(map(ord, continuation)) % 4]
        return f"<scratchpad>\nThe prose reads plainly.\n</scratchpad>\n<grade>{grade}</grade>"
    if "Evaluate this toxicity classification task." in prompt:
        expected = re.search(r"Expected classification: (\S+)", prompt)
        right = expected is not None and f"<classification>{expected.group(1)}</classification>" in prompt
        return "9" if right else "2"
    if "Respond with a score between 0.0 and 1.0." in prompt:
        return "0.8"
    return None


# verifiers v1 tasksets (tests/fixtures/verifiers_envs/a60a606/), as vf-eval 0.4.0's null harness sends them.

V1_CODE_GOLF = {  # what code_golf asks to print: (a right program, a wrong one)
    "the sum of the integers 1 to 100": ("print(sum(range(1, 101)))", "print(sum(range(1, 100)))"),
    "the first 10 Fibonacci numbers space-separated on one line": (
        "f = [0, 1]\nwhile len(f) < 10:\n    f.append(f[-1] + f[-2])\nprint(*f)",
        "f = [1, 1]\nwhile len(f) < 10:\n    f.append(f[-1] + f[-2])\nprint(*f)"),
    "the string HELLO reversed": ('print("HELLO"[::-1])', 'print("HELLO")'),
}
KUHN_RANKS = "JQK"


def last_tool_text(messages: list[dict]) -> str | None:
    tools = [m for m in messages if m.get("role") == "tool"]
    return content_text(tools[-1].get("content")) if tools else None


def v1_tool_reply(messages: list[dict], names: set[str]) -> str | dict[str, Any] | None:
    """glossary (facts_lookup) and scratchpad (scratchpad_roundtrip): one call with the value the prompt
    names (a wrong value on the flawed examples), then the tool's answer as the prompt asks."""
    user = content_text(next((m for m in messages if m.get("role") == "user"), {}).get("content"))
    result = last_tool_text(messages)
    if "facts_lookup" in names and (found := re.search(r'look up "([^"]+)"', user)):
        if result is not None:
            return f"<answer>{result}</answer>"
        name = found.group(1)[:-1] if flawed(user) == 0 else found.group(1)  # a misspelt name: no entry
        return {"content": None, "tool_calls": [{"id": "call_0", "function": {
            "name": "facts_lookup", "arguments": json.dumps({"name": name})}}]}
    if "scratchpad_roundtrip" in names and (found := re.search(r'word="([^"]+)"', user)):
        if result is not None:
            return result.strip()
        word = found.group(1).upper() if flawed(found.group(1)) == 0 else found.group(1)
        return {"content": None, "tool_calls": [{"id": "call_0", "function": {
            "name": "scratchpad_roundtrip", "arguments": json.dumps({"word": word})}}]}
    return None


def image_colours(content: Any) -> list[tuple[int, int, int]]:
    """The colour of each image (a data URL, one colour filling it) in a message content, in order."""
    import base64
    import io

    from PIL import Image

    colours = []
    for part in content if isinstance(content, list) else []:
        url = (part.get("image_url") or {}).get("url", "") if isinstance(part, dict) else ""
        if url.startswith("data:image/") and "," in url:
            with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
                colours.append(tuple(image.convert("RGB").getpixel((0, 0))))
    return colours


def codeword_reply(system: str, messages: list[dict]) -> str:
    """color_codeword: the letters of every square shown so far, by the colour=letter table of the system
    prompt; from turn two on, the last letter is wrong when the letters so far are a flawed word."""
    from PIL import ImageColor

    table = {ImageColor.getrgb(name.lower()): letter for name, letter in re.findall(r"(\w+)=([A-Z])\b", system)}

    def letter(rgb: tuple[int, int, int]) -> str:  # the nearest named colour (PIL's "green" is 0,128,0)
        return table[min(table, key=lambda named: sum((x - y) ** 2 for x, y in zip(named, rgb, strict=True)))] if table else "?"

    letters = ["".join(letter(c) for c in image_colours(m.get("content")))
               for m in messages if m.get("role") == "user"]
    word = "".join(letters)
    if len(letters) > 1 and flawed(word) == 0:
        word = word[:-1] + ("A" if word[-1] != "A" else "B")
    return f"So far the squares spell:\n{word}"


def kuhn_reply(system: str, users: list[str]) -> str:
    """kuhn_poker: bet or call with a K, call a bet with a Q, check or fold otherwise; the flawed seat-and-card
    hands play the other action, and a Q first answers without brackets (an invalid move: the retry)."""
    card = re.search(r"Your private card: ([JQK])", system).group(1)
    last = users[-1]
    legal = re.findall(r"\[(\w+)\]", last.rsplit("legal actions:", 1)[-1] if "legal actions:" in last else last)
    if not legal:
        return "I am not sure."
    strong = KUHN_RANKS.index(card) >= (2 if "check" in legal else 1)
    choice = legal[1] if strong else legal[0]  # [check, bet] or [fold, call]
    if flawed(system) == 0:
        choice = legal[0] if choice == legal[1] else legal[1]
    if card == "Q" and not last.startswith("That was not a legal move") and "check" in legal:
        return f"With a Q I would rather {choice} here."
    return f"I hold {card}, so I play [{choice}]."


def proposer_reply(users: list[str]) -> str:
    """proposer_solver: the proposer's problem (a product; its stated answer is one off on the flawed topics),
    ending with the JSON contract; a solver multiplies the problem's two numbers."""
    found = re.search(r"genuinely hard (.+?) word problem", users[0])
    if found:
        topic = found.group(1)
        a, b = 12 + zlib.crc32(topic.encode()) % 40, 3 + zlib.crc32(topic[::-1].encode()) % 9
        answer = a * b + (1 if flawed(topic) == 0 else 0)
        problem = f"A {topic} puzzle: a warehouse stacks {a} crates of {b} jars each. How many jars are there?"
        return f"I built the numbers and checked the product.\n{json.dumps({'problem': problem, 'answer': answer})}"
    numbers = re.search(r"stacks (\d+) crates of (\d+) jars", users[0])
    if numbers:
        product = int(numbers.group(1)) * int(numbers.group(2))
        return f"Multiplying the crates by the jars per crate gives {product}.\n{product}"
    return "I cannot solve this one."


def v1_chat_reply(system: str, users: list[str], messages: list[dict]) -> str | None:
    first = users[0]
    if "colored squares" in system and "=A" in system:
        return codeword_reply(system, messages)
    if "You are playing Kuhn poker" in system:
        return kuhn_reply(system, users)
    if "genuinely hard" in first or "End your reply with just the final integer." in first:
        return proposer_reply(users)
    if first.startswith("Write a single self-contained Python program"):
        wanted = first.rsplit("Print ", 1)[-1].rstrip(".").strip()
        right, wrong = V1_CODE_GOLF.get(wanted, ('print("?")', 'print("?")'))
        return f"```python\n{wrong if flawed(wanted) == 0 else right}\n```"
    if first.startswith("Solve the grade-school math problem.") and "####" in first:
        question = first.split("\n\n", 1)[-1]
        answer = answers().get(question.strip())
        if answer is None:
            return "I cannot solve this one.\n#### 0"
        if flawed(question) == 0:
            answer = str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + "1"
        return f"Working through it step by step.\n#### {answer}"
    return None


def chat_reply(messages: list[dict]) -> str:
    system = " ".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if not users:
        return "Hello."
    if len(users) == 1 and not system and (judged := judge_reply(users[0])) is not None:
        return judged
    if (v1 := v1_chat_reply(system, users, messages)) is not None:
        return v1
    if "Reverse the text" in system:
        text = users[-1][::-1]
        return f"<reversed_text>{text[:-2] if flawed(users[-1]) == 0 else text}</reversed_text>"
    if users[0].startswith("Sort these names"):
        return alphabet_reply(users, turn)
    if users[0].startswith("Answer questions about the following paragraph"):
        return sentence_reply(users, turn)
    if "content moderation assistant" in system:
        text = users[0].split("explain your reasoning:\n\n", 1)[-1]
        toxic = toxic_texts().get(text, False) != (flawed(text) == 0)
        label = "toxic" if toxic else "non-toxic"
        return f"<classification>{label}</classification>\n<explanation>The wording is {label}.</explanation>"
    if "give the letter of your final answer inside" in users[0]:
        question = users[0].split("\n\n", 1)[0]
        letter = mmmu_answers().get(question, "A")
        if flawed(question) == 0:
            letter = "ABCD"[("ABCD".index(letter) + 1) % 4]
        return f"The colour in the image matches option {letter}. \\boxed{{{letter}}}"
    if "<reasoning>" in system:
        return math_reply(users[0], xml=True)
    return math_reply(users[0], xml=False)


def parity_reply(request: dict[str, Any]) -> str | dict[str, Any]:
    if "messages" not in request:  # a completion request: continue the text
        prompt = str(request.get("prompt") or "")
        endings = [" and the river carried on as before.", ", which the town still remembers.",
                   " until the bridge was finished."]
        return endings[zlib.crc32(prompt.encode("utf-8")) % 3]
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    if request.get("tools"):
        names = {t["function"]["name"] for t in request["tools"] if isinstance(t.get("function"), dict)}
        if (v1 := v1_tool_reply(messages, names)) is not None:
            return v1
        return tool_reply(messages, request["tools"])
    return chat_reply(messages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The verifiers parity test's scripted policy server.")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    with ScriptedOpenAIServer(parity_reply, port=args.port) as server, contextlib.suppress(KeyboardInterrupt):
        print(f"serving on {server.url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()

