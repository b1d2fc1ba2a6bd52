"""How `prime env check` writes the reference reply: the first writing the parser reads back as the answer."""

from __future__ import annotations

import re

import prime_cli.envs as vf
from prime_cli.workspace.env_check.writings import find_writer, prompt_tags, reads_back, replies_for


def boxed(text: str) -> str | None:
    found = re.findall(r"\\boxed\{([^}]*)\}", text or "")
    return found[-1] if found else None


def guess(text: str) -> str | None:
    found = re.search(r"<guess>\s*(\w+)\s*</guess>", text or "")
    return found.group(1) if found else None


def test_each_parser_gets_the_writing_it_reads_back():
    answers = ["42", "7"]
    xml = vf.XMLParser(["think", "answer"])
    assert find_writer(xml, "", answers).how == "xml"
    assert find_writer(vf.Parser(extract_fn=boxed), "End with \\boxed{}.", answers).how == "boxed"
    assert find_writer(vf.Parser(extract_fn=guess), "Reply as <guess>word</guess>.", ["crane"]).how == "tag:guess"
    assert find_writer(vf.Parser(), "Say the number.", answers).how == "as is"
    think = find_writer(vf.ThinkParser(), "", answers)
    assert think.write("42").startswith("<think>") and think.reads_back("42")


def test_the_xml_reference_fills_every_field_so_the_format_reward_pays_it():
    parser = vf.XMLParser(["think", "answer"])
    text = find_writer(parser, "", ["5"]).write("5")
    assert parser.get_format_reward_func()([{"role": "assistant", "content": text}]) == 1.0
    assert reads_back(parser, text, "5")


def test_prompt_tags_leave_out_reasoning():
    assert prompt_tags("Think in <think></think>, answer in <answer> tags, or <answer>x</answer>") == ["answer"]


def test_kinds_that_do_not_apply_to_a_row_are_left_out():
    rows = [{"prompt": [{"role": "user", "content": "q1"}], "answer": "ab"},
            {"prompt": [{"role": "user", "content": "q2"}], "answer": "ab"}]
    replies = replies_for(rows, find_writer(vf.Parser(), "", ["ab"]))
    first = replies[0]
    assert first["reference"] == "ab" and first["empty"] == ""
    assert first["other_answer"] is None  # every other row has the same answer
    assert first["unformatted"] is None  # the reference is the answer as is
    assert first["prefix"] is None  # the answer is no longer than the prefix
    assert first["echo"] == "q1" and first["repetition"].count("ab") == 30
