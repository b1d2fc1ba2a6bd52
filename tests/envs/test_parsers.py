"""Tests of the environment API's parsers: Parser, XMLParser, ThinkParser, MaybeThinkParser."""

from __future__ import annotations

import pytest

from prime_cli.envs.errors import EnvConfigError
from prime_cli.envs.parsers import MaybeThinkParser, Parser, ThinkParser, XMLParser
from prime_cli.envs.parsers.think_parser import strip_think, think_spans


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def asst(content) -> dict:
    return {"role": "assistant", "content": content}


def multimodal(*texts: str) -> list[dict]:
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    return parts + [{"type": "text", "text": t} for t in texts]


# ----------------------------------------------------------------------------- Parser


class TestParser:
    def test_parse_is_identity_by_default(self):
        assert Parser().parse("  hello ") == "  hello "

    def test_extract_fn_applied(self):
        parser = Parser(extract_fn=lambda s: s.upper())
        assert parser.parse("abc") == "ABC"
        assert parser.parse_answer([user("q"), asst("xyz")]) == "XYZ"

    def test_extract_fn_must_be_callable(self):
        with pytest.raises(EnvConfigError, match="callable"):
            Parser(extract_fn="nope")  # type: ignore[arg-type]

    def test_parse_answer_uses_last_assistant_message(self):
        completion = [asst("first"), user("more"), asst("second"), user("trailing user")]
        assert Parser().parse_answer(completion) == "second"

    def test_parse_answer_string_completion(self):
        assert Parser().parse_answer("plain text") == "plain text"

    @pytest.mark.parametrize("completion", [[], [user("only a user")], None])
    def test_parse_answer_without_assistant_message_is_none(self, completion):
        called = []
        parser = Parser(extract_fn=lambda s: called.append(s) or s)
        assert parser.parse_answer(completion) is None
        assert called == []

    def test_parse_answer_multimodal_content(self):
        assert Parser().parse_answer([asst(multimodal("a", "b"))]) == "ab"

    def test_format_reward(self):
        reward = Parser().get_format_reward_func()
        assert reward.__name__ == "format_reward"
        assert reward([asst("text")]) == 1.0
        assert reward("text", answer="x", state={}) == 1.0
        assert reward([asst("text"), asst("   ")]) == 0.0  # only the last one counts
        assert reward([asst(None)]) == 0.0
        assert reward([]) == 0.0
        assert reward("") == 0.0
        assert reward([user("hi")]) == 0.0

    def test_message_helpers(self):
        messages = [
            {"role": "system", "content": "s"},
            user("u"),
            asst("a"),
            {"role": "tool", "content": "t", "tool_call_id": "1"},
        ]
        parser = Parser()
        assert [m["content"] for m in parser.get_assistant_messages(messages)] == ["a"]
        assert parser.get_assistant_texts(messages) == ["a"]
        assert parser.get_last_assistant_text(messages) == "a"
        assert [m["content"] for m in parser.get_user_messages(messages)] == ["u"]
        assert [m["content"] for m in parser.get_system_messages(messages)] == ["s"]
        assert [m["content"] for m in parser.get_tool_messages(messages)] == ["t"]
        assert parser.get_user_messages("a string") == []


# ----------------------------------------------------------------------------- XMLParser


@pytest.fixture
def xml() -> XMLParser:
    return XMLParser(["reasoning", "answer"])


class TestXMLParserFields:
    @pytest.mark.parametrize(
        ("fields", "named"),
        [
            ([], "empty"),
            ("answer", "'answer'"),
            (["ans wer"], "'ans wer'"),
            (["<answer>"], "'<answer>'"),
            (["1st"], "'1st'"),
            ([""], "''"),
            ([()], r"\(\)"),
            ([("code", "bad name")], "'bad name'"),
            ([3], "3"),
            (["answer", "answer"], "'answer'"),
            (["answer", ("code", "answer")], "'answer'"),
        ],
    )
    def test_bad_fields_raise(self, fields, named):
        with pytest.raises(EnvConfigError, match=named):
            XMLParser(fields)

    def test_undeclared_answer_field_raises(self):
        with pytest.raises(EnvConfigError, match="'final'"):
            XMLParser(["answer"], answer_field="final")
        # the default answer_field may be undeclared (ported parsers that never parse an answer)...
        parser = XMLParser(["think", "code"])
        assert parser.parse("<code>x</code>").code == "x"
        # ...but asking for the answer then explains the problem
        with pytest.raises(EnvConfigError, match="'answer'"):
            parser.parse_answer("<code>x</code>")

    def test_format_reward_skips_tool_call_only_messages(self):
        reward = XMLParser(["answer"]).get_format_reward_func()
        completion = [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "r", "tool_call_id": "1"},
            {"role": "assistant", "content": "<answer>4</answer>"},
        ]
        assert reward(completion) == 1.0
        assert reward([{"role": "assistant", "content": ""}]) == 0.0

    def test_get_fields_are_canonical(self):
        parser = XMLParser(["think", ("code", "answer"), "final-answer"])
        assert parser.get_fields() == ["think", "code", "final-answer"]


class TestXMLParserParse:
    def test_basic(self, xml):
        parsed = xml.parse("<reasoning>\n because \n</reasoning>\n<answer> 42 </answer>")
        assert parsed.reasoning == "because"
        assert parsed.answer == "42"
        assert set(vars(parsed)) == {"reasoning", "answer"}

    def test_strip_false_keeps_whitespace(self, xml):
        assert xml.parse("<answer>\n 42 \n</answer>", strip=False).answer == "\n 42 \n"

    def test_missing_field_is_none(self, xml):
        parsed = xml.parse("<answer>42</answer>")
        assert parsed.reasoning is None
        assert parsed.answer == "42"

    @pytest.mark.parametrize("text", ["", None])
    def test_empty_text_all_none(self, xml, text):
        assert vars(xml.parse(text)) == {"reasoning": None, "answer": None}

    def test_unclosed_tag_is_none(self, xml):
        assert xml.parse("<answer>42").answer is None
        assert xml.parse("<reasoning>r</reasoning><answer>42").answer is None

    def test_truncated_repeat_falls_back_to_last_complete(self, xml):
        assert xml.parse("<answer>1</answer> then <answer>2").answer == "1"

    def test_orphan_closing_tag_ignored(self, xml):
        assert xml.parse("42</answer>").answer is None
        assert xml.parse("x</answer><answer>7</answer>").answer == "7"

    def test_mismatched_tags(self, xml):
        parsed = xml.parse("<answer>42</reasoning>")
        assert parsed.answer is None and parsed.reasoning is None

    def test_exact_matching(self, xml):
        assert xml.parse("<Answer>1</Answer>").answer is None
        assert xml.parse('<answer id="1">1</answer>').answer is None
        assert xml.parse("<answer >1</answer >").answer is None
        assert xml.parse("<answers>1</answers>").answer is None
        assert xml.parse("<answer>1</answer>").answer == "1"

    def test_repeated_tag_last_by_default(self, xml):
        text = "<answer>1</answer> <answer>2</answer> <answer>3</answer>"
        assert xml.parse(text).answer == "3"
        assert xml.parse(text, last=False).answer == "1"

    def test_nested_same_tag_is_balanced(self, xml):
        text = "<answer>a<answer>b</answer>c</answer>"
        assert xml.parse(text).answer == "a<answer>b</answer>c"
        assert xml.parse(text, last=False).answer == "a<answer>b</answer>c"

    def test_nested_then_repeated(self, xml):
        text = "<answer>a<answer>b</answer>c</answer><answer>d</answer>"
        assert xml.parse(text).answer == "d"
        assert xml.parse(text, last=False).answer == "a<answer>b</answer>c"

    def test_unclosed_outer_with_complete_inner(self, xml):
        assert xml.parse("<answer>draft <answer>5</answer>").answer == "5"

    def test_other_tags_inside_value(self, xml):
        assert xml.parse("<answer><b>x</b></answer>").answer == "<b>x</b>"

    def test_answer_inside_think_ignored(self, xml):
        assert (
            xml.parse("<think><answer>draft</answer></think><answer>final</answer>").answer
            == "final"
        )
        assert xml.parse("<think><answer>draft</answer></think>no answer").answer is None

    def test_unclosed_think_hides_rest(self, xml):
        assert xml.parse("<think>hmm <answer>1</answer>").answer is None
        assert xml.parse("<answer>0</answer><think>hmm <answer>1</answer>").answer == "0"

    def test_orphan_think_close_hides_before(self, xml):
        assert xml.parse("<answer>draft</answer> ok </think><answer>2</answer>").answer == "2"
        assert xml.parse("<answer>draft</answer></think>").answer is None

    def test_nested_think_is_balanced(self, xml):
        text = "<think>a<think>b</think><answer>inner</answer></think><answer>out</answer>"
        assert xml.parse(text, last=False).answer == "out"

    def test_think_inside_value_is_cut(self, xml):
        assert xml.parse("<answer>4<think>hmm</think>2</answer>").answer == "42"

    def test_think_as_declared_field(self):
        parser = XMLParser(["think", "answer"])
        parsed = parser.parse("<think> plan <answer>draft</answer></think><answer>5</answer>")
        assert parsed.think == "plan <answer>draft</answer>"
        assert parsed.answer == "5"
        assert parser.parse("<think><answer>draft</answer></think>").answer == "draft"

    def test_alternatives(self):
        parser = XMLParser(["reasoning", ("code", "answer")])
        assert parser.parse("<answer>x</answer>").code == "x"
        assert parser.parse("<code>y</code>").code == "y"
        assert not hasattr(parser.parse("<code>y</code>"), "answer")
        both = "<answer>x</answer><code>y</code>"
        assert parser.parse(both).code == "y"
        assert parser.parse(both, last=False).code == "x"

    def test_field_names_with_punctuation(self):
        parser = XMLParser(["final-answer", "a.b"], answer_field="final-answer")
        parsed = parser.parse("<final-answer>1</final-answer><a.b>2</a.b><aXb>3</aXb>")
        assert getattr(parsed, "final-answer") == "1"
        assert getattr(parsed, "a.b") == "2"


class TestXMLParserParseAnswer:
    def test_string_completion(self, xml):
        assert xml.parse_answer("<reasoning>r</reasoning><answer> 7 </answer>") == "7"

    def test_picks_last_assistant_message_with_answer(self, xml):
        completion = [
            asst("<answer>1</answer>"),
            user("tool output"),
            asst("<answer>2</answer>"),
            user("more"),
            asst("no tags here"),
            asst("<answer>3"),  # truncated: does not count
        ]
        assert xml.parse_answer(completion) == "2"

    def test_empty_complete_answer_counts(self, xml):
        assert xml.parse_answer([asst("<answer>1</answer>"), asst("<answer> </answer>")]) == ""

    def test_answer_only_in_user_message_is_ignored(self, xml):
        assert xml.parse_answer([user("<answer>9</answer>"), asst("none")]) is None

    @pytest.mark.parametrize("completion", ["", [], [user("q")], [asst(None)]])
    def test_no_answer(self, xml, completion):
        assert xml.parse_answer(completion) is None

    def test_answer_inside_think_ignored(self, xml):
        completion = [asst("<answer>old</answer>"), asst("<think><answer>draft</answer></think>")]
        assert xml.parse_answer(completion) == "old"

    def test_multimodal(self, xml):
        assert xml.parse_answer([asst(multimodal("<answer>", "12</answer>"))]) == "12"

    def test_extract_fn_applied_to_answer(self):
        parser = XMLParser(["answer"], extract_fn=int)
        assert parser.parse_answer("<answer> 12 </answer>") == 12
        assert parser.parse_answer("nothing") is None

    def test_alternative_answer_field_only_matches_that_tag(self):
        parser = XMLParser(["think", ("tool", "answer")], answer_field="answer")
        assert parser.parse_answer([asst("<answer>a</answer>"), asst("<tool>t</tool>")]) == "a"
        assert parser.parse_answer([asst("<tool>t</tool>")]) is None

    def test_canonical_answer_field_matches_alternatives(self):
        parser = XMLParser([("answer", "final")])
        assert parser.parse_answer("<final>f</final>") == "f"


class TestXMLParserFormat:
    def test_format_in_declared_order(self, xml):
        assert xml.format(answer="42", reasoning="r") == (
            "<reasoning>\nr\n</reasoning>\n<answer>\n42\n</answer>"
        )

    def test_format_roundtrip(self):
        parser = XMLParser(["think", ("code", "answer")])
        text = parser.format(think="t", code="print(1)")
        assert parser.parse(text).think == "t"
        assert parser.parse(text).code == "print(1)"

    def test_format_skips_none_and_converts_values(self, xml):
        assert xml.format(reasoning=None, answer=3) == "<answer>\n3\n</answer>"

    def test_format_alternative_name_is_written(self):
        parser = XMLParser([("code", "answer")])
        assert parser.format(answer="x") == "<answer>\nx\n</answer>"
        with pytest.raises(EnvConfigError, match="same field"):
            parser.format(code="a", answer="b")

    def test_format_unknown_field_raises(self, xml):
        with pytest.raises(EnvConfigError, match="'bogus'"):
            xml.format(bogus="x")

    def test_format_str(self):
        text = XMLParser(["reasoning", ("code", "answer")]).get_format_str()
        assert "<reasoning>\n...\n</reasoning>\n<code>\n...\n</code>" in text
        assert "Instead of <code> you may use <answer>." in text


class TestXMLParserFormatReward:
    @pytest.fixture
    def reward(self, xml):
        return xml.get_format_reward_func()

    def test_name(self, reward):
        assert reward.__name__ == "format_reward"

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("<reasoning>r</reasoning><answer>a</answer>", 1.0),
            ("<answer>a</answer>", 0.5),
            ("<reasoning>r</reasoning><answer>a", 0.5),  # unclosed
            ("<reasoning>r</reasoning><answer>a</answer><answer>b</answer>", 0.5),  # repeated
            ("<reasoning>r</reasoning><answer>a<answer>b</answer></answer>", 0.5),  # nested
            ("<reasoning>r</reasoning></answer>a<answer>", 0.5),  # reversed
            ("<reasoning>r</reasoning><answer>  </answer>", 0.5),  # blank
            ("<think><answer>x</answer></think><reasoning>r</reasoning>", 0.5),  # in think
            ("<think>a</think><reasoning>r</reasoning><answer>a</answer>", 1.0),
            ("<think><answer>d</answer></think><reasoning>r</reasoning><answer>a</answer>", 1.0),
            ("no tags", 0.0),
            ("", 0.0),
        ],
    )
    def test_single_message(self, reward, text, expected):
        assert reward(text) == expected
        assert reward([user("q"), asst(text)]) == expected

    def test_average_over_assistant_messages(self, reward):
        completion = [
            asst("<reasoning>r</reasoning><answer>a</answer>"),
            user("<reasoning>r</reasoning>"),
            asst("<answer>a</answer>"),
            asst("nothing"),
            asst("<reasoning>r</reasoning>"),
        ]
        assert reward(completion) == pytest.approx((1.0 + 0.5 + 0.0 + 0.5) / 4)

    @pytest.mark.parametrize("completion", [[], [user("<answer>a</answer>")]])
    def test_no_assistant_messages(self, reward, completion):
        assert reward(completion) == 0.0

    def test_alternatives_count_if_any_appears_once(self):
        reward = XMLParser(["reasoning", ("code", "answer")]).get_format_reward_func()
        assert reward("<reasoning>r</reasoning><answer>a</answer>") == 1.0
        assert reward("<reasoning>r</reasoning><code>c</code>") == 1.0
        assert (
            reward("<reasoning>r</reasoning><code>c</code><answer>a</answer><answer>b</answer>")
            == 1.0
        )
        assert reward("<reasoning>r</reasoning><answer>a</answer><answer>b</answer>") == 0.5

    def test_think_declared_counts(self):
        reward = XMLParser(["think", "answer"]).get_format_reward_func()
        assert reward("<think>t</think><answer>a</answer>") == 1.0
        assert reward("<think><answer>d</answer></think><answer>a</answer>") == 0.5
        assert reward("<answer>a</answer>") == 0.5

    def test_multimodal(self, reward):
        assert reward([asst(multimodal("<reasoning>r</reasoning>", "<answer>a</answer>"))]) == 1.0


# ----------------------------------------------------------------------------- think parsers


class TestThinkHelpers:
    def test_think_spans(self):
        assert think_spans("a<think>b</think>c") == [(1, 17)]
        assert think_spans("a<think>b") == [(1, 9)]
        assert think_spans("ab</think>c") == [(0, 10)]
        assert think_spans("no tags") == []

    def test_strip_think(self):
        assert strip_think("<think>x</think>y<think>z</think>w") == "yw"
        assert strip_think("x<think>a<think>b</think>c</think>y") == "xy"
        assert strip_think("y<think>never closed") == "y"
        assert strip_think("reasoning</think>answer") == "answer"


class TestThinkParser:
    def test_parse_after_last_think_close(self):
        parser = ThinkParser()
        assert parser.parse("<think>hmm</think>\n 42 ") == "42"
        assert parser.parse("<think>a</think>b<think>c</think> d") == "d"

    def test_parse_without_think_close_is_none(self):
        parser = ThinkParser()
        assert parser.parse("<think>still thinking... 42") is None
        assert parser.parse("42") is None
        assert parser.parse("") is None

    def test_parse_orphan_close(self):
        assert ThinkParser().parse("reasoning</think>answer") == "answer"

    def test_extract_fn(self):
        parser = ThinkParser(extract_fn=lambda s: s.split()[-1])
        assert parser.parse("<think>x</think> the answer is 7") == "7"
        assert parser.parse_answer([asst("<think>x</think> so 9"), user("ok")]) == "9"

    def test_parse_answer(self):
        parser = ThinkParser()
        completion = [asst("<think>a</think>first"), asst("<think>b</think>second")]
        assert parser.parse_answer(completion) == "second"
        assert parser.parse_answer([asst("<think>a</think>first"), asst("<think>cut")]) is None
        assert parser.parse_answer([]) is None
        assert parser.parse_answer("<think>a</think> s ") == "s"
        assert parser.parse_answer([asst(multimodal("<think>a</think>", "mm"))]) == "mm"

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("<think>r</think>answer", 1.0),
            ("  \n<think>r</think>\nanswer", 1.0),
            ("x<think>r</think>answer", 0.0),  # does not start with think
            ("<think>r</think>", 0.0),  # nothing after
            ("<think>r</think>   ", 0.0),
            ("<think>r", 0.0),  # unclosed
            ("<think><think>r</think>answer", 0.0),  # two opens
            ("<think>r</think>a</think>b", 0.0),  # two closes
            ("<think>r</think>a<think>b</think>c", 0.0),
            ("answer", 0.0),
            ("", 0.0),
        ],
    )
    def test_format_reward(self, text, expected):
        reward = ThinkParser().get_format_reward_func()
        assert reward.__name__ == "format_reward"
        assert reward(text) == expected

    def test_format_reward_average(self):
        reward = ThinkParser().get_format_reward_func()
        completion = [
            asst("<think>r</think>a"),
            user("u"),
            asst("no think"),
            asst("<think>r</think>b"),
        ]
        assert reward(completion) == pytest.approx(2 / 3)
        assert reward([]) == 0.0
        assert reward([user("<think>r</think>a")]) == 0.0


class TestMaybeThinkParser:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("<think>r</think> 42 ", "42"),
            (" 42 ", "42"),
            ("before<think>r</think>after", "beforeafter"),
            ("42<think>unfinished reasoning", "42"),
            ("<think>unfinished", ""),
            ("r</think>42", "42"),
            ("", ""),
        ],
    )
    def test_parse(self, text, expected):
        assert MaybeThinkParser().parse(text) == expected

    def test_extract_fn_and_parse_answer(self):
        parser = MaybeThinkParser(extract_fn=lambda s: s.replace("answer:", "").strip())
        assert parser.parse_answer([asst("<think>x</think>answer: 5")]) == "5"
        assert parser.parse_answer([asst("answer: 6"), user("u")]) == "6"
        assert parser.parse_answer([user("u")]) is None

    def test_format_reward(self):
        reward = MaybeThinkParser().get_format_reward_func()
        assert reward.__name__ == "format_reward"
        assert reward("<think>r</think>42") == 1.0
        assert reward("42") == 1.0
        assert reward("<think>only reasoning</think>") == 0.0
        assert reward("<think>unfinished") == 0.0
        assert reward([]) == 0.0
