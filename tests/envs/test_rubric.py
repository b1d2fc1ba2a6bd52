"""Tests of Rubric, RubricGroup, JudgeRubric and reward-function injection."""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import types
from typing import Any

import pytest

from prime_cli.envs.errors import RubricError
from prime_cli.envs.parsers import Parser
from prime_cli.envs.rubrics import (
    DEFAULT_JUDGE_PROMPT,
    JudgeRubric,
    RolloutScore,
    Rubric,
    RubricGroup,
)
from prime_cli.envs.rubrics.injection import analyze
from prime_cli.envs.types import ChatResponse, State


def make_state(completion: str = "4", answer: str = "4", example_id: int = 0, **extra: Any) -> State:
    return State(
        prompt=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}],
        completion=[{"role": "assistant", "content": completion}],
        answer=answer,
        task="math",
        info={"level": 1},
        example_id=example_id,
        timing={"generation_ms": 5.0},
        **extra,
    )


def exact(completion, answer) -> float:
    return 1.0 if completion[-1]["content"] == answer else 0.0


# --- injection ---------------------------------------------------------------------------------


async def test_each_singular_name_is_injected():
    seen: dict[str, Any] = {}

    def f_prompt(prompt):
        seen["prompt"] = prompt
        return 0

    def f_completion(completion):
        seen["completion"] = completion
        return 0

    def f_answer(answer):
        seen["answer"] = answer
        return 0

    def f_state(state):
        seen["state"] = state
        return 0

    def f_task(task):
        seen["task"] = task
        return 0

    def f_info(info):
        seen["info"] = info
        return 0

    def f_parser(parser):
        seen["parser"] = parser
        return 0

    parser = Parser()
    rubric = Rubric([f_prompt, f_completion, f_answer, f_state, f_task, f_info, f_parser], parser=parser)
    state = make_state()
    await rubric.score_rollout(state)
    assert seen["prompt"] == state["prompt"]
    assert seen["completion"] == [{"role": "assistant", "content": "4"}]
    assert seen["answer"] == "4"
    assert seen["state"] is state
    assert seen["task"] == "math"
    assert seen["info"] == {"level": 1}
    assert seen["parser"] is parser
    assert state["metrics_errors"] == []


async def test_kwargs_receive_everything():
    got: dict[str, Any] = {}

    def everything(completion, **kwargs):
        got.update(kwargs, completion=completion)
        return 1.0

    rubric = Rubric([everything])
    state = make_state()
    await rubric.score_rollout(state)
    assert set(got) == {"prompt", "completion", "answer", "state", "task", "info", "parser"}
    assert got["state"] is state and got["parser"] is rubric.parser


async def test_default_is_kept_when_name_not_available():
    def scaled(completion, answer, scale=0.5):
        return scale * exact(completion, answer)

    state = make_state()
    await Rubric([scaled]).score_rollout(state)
    assert state["reward"] == 0.5


async def test_unknown_required_parameter_raises_naming_it():
    def needs_secret(completion, secret):
        return 1.0

    rubric = Rubric([needs_secret])
    with pytest.raises(RubricError) as err:
        await rubric.score_rollout(make_state())
    msg = str(err.value)
    assert "needs_secret" in msg and "'secret'" in msg and "completion" in msg


async def test_mixing_singular_and_plural_names_is_an_error():
    def mixed(completion, answers):
        return [1.0]

    with pytest.raises(RubricError, match="mixes"):
        Rubric([mixed])


def test_analysis_handles_partials_methods_callables_and_caches():
    def base(completion, answer, bonus):
        return 1.0

    class Scorer:
        def method(self, states):
            return [1.0] * len(states)

        def __call__(self, answer):
            return 1.0

    p = functools.partial(base, bonus=2)
    assert analyze(p).name == "base" and "bonus" not in analyze(p).required
    method_sig = analyze(Scorer().method)
    assert method_sig.is_group and method_sig.keyword == ("states",)
    assert analyze(Scorer().method) is method_sig  # cached across bound-method objects
    assert analyze(Scorer()).keyword == ("answer",) and analyze(Scorer()).name == "Scorer"
    assert analyze(base) is analyze(base)


async def test_class_objects_are_injected():
    def uses_tool(completion, lookup):
        return lookup[completion[-1]["content"]]

    rubric = Rubric([uses_tool])
    rubric.add_class_object("lookup", {"4": 0.75})
    state = make_state()
    await rubric.score_rollout(state)
    assert state["reward"] == 0.75 and state["metrics"] == {"uses_tool": 0.75}


# --- scoring -----------------------------------------------------------------------------------


async def test_sync_and_async_functions_and_weights():
    async def async_exact(completion, answer):
        await asyncio.sleep(0)
        return exact(completion, answer)

    def length_penalty(completion) -> int:
        return len(completion[-1]["content"])

    rubric = Rubric([async_exact, length_penalty], weights=[2.0, -0.25])
    state = make_state(completion="4")
    await rubric.score_rollout(state)
    assert state["metrics"] == {"async_exact": 1.0, "length_penalty": 1.0}
    assert state["reward"] == pytest.approx(2.0 - 0.25)
    assert state["timing"]["scoring_ms"] >= 0.0 and state["timing"]["generation_ms"] == 5.0


async def test_add_metric_counts_in_metrics_not_reward():
    rubric = Rubric([exact])
    rubric.add_metric(lambda completion: 7)
    assert rubric.get_reward_weights() == [1.0, 0.0]
    state = make_state()
    await rubric.score_rollout(state)
    assert state["metrics"] == {"exact": 1.0, "<lambda>": 7.0}
    assert state["reward"] == 1.0


async def test_raising_function_scores_zero_and_is_recorded(caplog):
    def broken(completion):
        raise KeyError("missing field")

    rubric = Rubric([broken, exact], weights=[1.0, 3.0])
    state = make_state()
    with caplog.at_level(logging.WARNING, logger="prime_cli.envs.rubric"):
        await rubric.score_rollout(state)
    assert state["metrics"] == {"broken": 0.0, "exact": 1.0}
    assert state["reward"] == 3.0
    assert state["metrics_errors"] == [{"func": "broken", "type": "KeyError", "message": "'missing field'"}]
    assert any("broken" in r.getMessage() and "KeyError" in r.getMessage() for r in caplog.records)


async def test_failures_keep_their_weight_and_traceback_in_the_details_only():
    def broken(completion):
        raise KeyError("missing field")

    def shaky(completion):
        raise ValueError("no length")

    rubric = Rubric([broken], weights=[2.0])
    rubric.add_metric(shaky)
    state = make_state()
    await rubric.score_rollout(state)
    assert [e["func"] for e in state["metrics_errors"]] == ["broken", "shaky"]
    assert all(set(e) == {"func", "type", "message"} for e in state["metrics_errors"])  # what results files keep
    details = state["metrics_error_details"]
    assert [(d["func"], d["weight"]) for d in details] == [("broken", 2.0), ("shaky", 0.0)]
    assert 'raise KeyError("missing field")' in details[0]["traceback"]
    assert details[1]["traceback"].rstrip().endswith("ValueError: no length")


@pytest.mark.parametrize(
    "value, kind",
    [(None, "TypeError"), ("1.0", "TypeError"), (float("nan"), "ValueError"), (float("inf"), "ValueError")],
)
async def test_bad_return_values_are_recorded(value, kind):
    def bad(completion):
        return value

    state = make_state()
    await Rubric([bad, exact]).score_rollout(state)
    assert state["metrics"]["bad"] == 0.0 and state["reward"] == 1.0
    [error] = state["metrics_errors"]
    assert error["func"] == "bad" and error["type"] == kind and "bad" in error["message"]


async def test_bool_return_is_a_number():
    state = make_state()
    await Rubric([lambda answer: answer == "4"]).score_rollout(state)
    assert state["reward"] == 1.0 and isinstance(state["reward"], float)


def test_funcs_weights_length_mismatch():
    with pytest.raises(RubricError, match="funcs has 3 entries but weights has 2"):
        Rubric([exact, lambda state: 0, lambda task: 0], weights=[1.0, 2.0])


def test_duplicate_names_are_rejected():
    def exact2(completion):
        return 0

    exact2.__name__ = "exact"
    rubric = Rubric([exact])
    with pytest.raises(RubricError, match="rename"):
        rubric.add_reward_func(exact2)
    with pytest.raises(RubricError, match="rename"):
        rubric.add_metric(functools.partial(exact, answer="4"))
    assert rubric.get_reward_func_names() == ["exact"]
    assert rubric.get_reward_funcs() == [exact]


# --- groups ------------------------------------------------------------------------------------


async def test_group_function_sees_whole_group():
    calls: list[list[str]] = []

    def rank(completions, answers, states) -> list[float]:
        calls.append([c[-1]["content"] for c in completions])
        assert len(states) == len(answers) == 3
        return [float(i) for i in range(len(completions))]

    states = [make_state(completion=c, example_id=0) for c in ("a", "4", "b")]
    await Rubric([rank, exact]).score_group(states)
    assert calls == [["a", "4", "b"]]
    assert [s["metrics"]["rank"] for s in states] == [0.0, 1.0, 2.0]
    assert [s["reward"] for s in states] == [0.0, 2.0, 2.0]


async def test_group_function_errors_affect_whole_group_or_one_rollout():
    async def wrong_length(completions):
        return [1.0]

    def one_nan(completions):
        return [1.0, float("nan")]

    def raises(states):
        raise RuntimeError("judge down")

    states = [make_state(example_id=0), make_state(example_id=0)]
    await Rubric([wrong_length, one_nan, raises]).score_group(states)
    first, second = states
    assert first["metrics"] == {"wrong_length": 0.0, "one_nan": 1.0, "raises": 0.0}
    assert [e["func"] for e in first["metrics_errors"]] == ["wrong_length", "raises"]
    assert [e["func"] for e in second["metrics_errors"]] == ["wrong_length", "one_nan", "raises"]
    assert first["metrics_errors"][1] == {"func": "raises", "type": "RuntimeError", "message": "judge down"}
    assert "returned 1 scores for a group of 2" in first["metrics_errors"][0]["message"]


async def test_score_rollout_gives_group_functions_one_element_lists():
    sizes: list[int] = []

    def size(states):
        sizes.append(len(states))
        return [1.0] * len(states)

    rubric = Rubric([size])
    group = [make_state(), make_state()]
    await rubric.score_group(group)
    for state in group:
        await rubric.score_rollout(state)
    assert sizes == [2, 1, 1]


async def test_individual_functions_run_concurrently_across_rollouts():
    active = 0
    peak = 0

    async def slow(answer):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return 1.0

    states = [make_state(example_id=0) for _ in range(4)]
    await Rubric([slow]).score_group(states)
    assert peak == 4


async def test_compute_scores_does_not_write_and_rescoring_replaces():
    rubric = Rubric([exact])
    state = make_state(completion="5")
    [score] = await rubric.compute_scores([state])
    assert score == RolloutScore(reward=0.0, metrics={"exact": 0.0}, errors=[])
    assert "reward" not in state
    state["metrics_errors"] = [{"func": "old", "type": "X", "message": "stale"}]
    await rubric.score_rollout(state)
    assert state["metrics_errors"] == [] and state["reward"] == 0.0


async def test_missing_timing_is_created():
    state = make_state()
    del state["timing"]
    await Rubric([exact]).score_rollout(state)
    assert isinstance(state["timing"]["scoring_ms"], float)


async def test_rubric_group_sums_rewards_and_merges_metrics():
    def shared(answer):
        return 1.0

    def fmt(completion):
        return 0.5

    def broken(state):
        raise ValueError("nope")

    first = Rubric([exact, shared], weights=[1.0, 2.0])
    second = Rubric([shared, fmt, broken])
    group = RubricGroup([first, second])
    assert group.get_reward_func_names() == ["exact", "shared", "fmt", "broken"]
    state = make_state()
    await group.score_rollout(state)
    assert state["reward"] == pytest.approx(1.0 + 2.0 + 1.0 + 0.5)
    assert state["metrics"] == {"exact": 1.0, "shared": 2.0, "fmt": 0.5, "broken": 0.0}
    assert [e["type"] for e in state["metrics_errors"]] == ["ValueError"]

    group.add_reward_func(lambda task: 1.0)
    assert first.get_reward_func_names()[-1] == "<lambda>"
    with pytest.raises(RubricError):
        RubricGroup([])


# --- JudgeRubric -------------------------------------------------------------------------------


class FakeChatClient:
    """Our ChatClient protocol."""

    def __init__(self, reply: str = "yes") -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    async def chat(self, messages, *, model, tools=None, sampling_args=None) -> ChatResponse:
        self.calls.append({"messages": messages, "model": model, "sampling_args": sampling_args})
        await asyncio.sleep(0)
        return ChatResponse(message={"role": "assistant", "content": self.reply})


class FakeOpenAI:
    """OpenAI SDK shape: client.chat.completions.create(...) -> .choices[0].message.content."""

    def __init__(self, reply: str = "no") -> None:
        self.calls: list[dict[str, Any]] = []
        outer = self

        class Completions:
            async def create(self, **kwargs):
                outer.calls.append(kwargs)
                message = types.SimpleNamespace(content=reply)
                return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])

        self.chat = types.SimpleNamespace(completions=Completions())


async def judged(judge, prompt, completion, answer, state) -> float:
    return 1.0 if "yes" in (await judge(prompt, completion, answer, state)).lower() else 0.0


async def judged_again(judge, prompt, completion, answer, state) -> float:
    return 0.5 if "yes" in (await judge(prompt, completion, answer, state)).lower() else 0.0


async def test_judge_with_our_protocol_client_and_cache_shared():
    client = FakeChatClient("Yes")
    rubric = JudgeRubric(
        judge_client=client, judge_model="judge-m", judge_sampling_args={"temperature": 0}, funcs=[judged, judged_again]
    )
    state = make_state(completion="four", answer="4")
    await rubric.score_rollout(state)
    assert state["reward"] == 1.5
    assert len(client.calls) == 1
    call = client.calls[0]
    assert call["model"] == "judge-m" and call["sampling_args"] == {"temperature": 0}
    expected = DEFAULT_JUDGE_PROMPT.format(question="2+2?", answer="4", response="four")
    assert call["messages"] == [{"role": "user", "content": expected}]
    assert state["judge_response"] == {expected: "Yes"}


async def test_judge_concurrent_calls_share_one_request():
    client = FakeChatClient("yes")
    rubric = JudgeRubric(judge_client=client)
    state = make_state()
    replies = await asyncio.gather(*(rubric.judge(state["prompt"], state["completion"], "4", state) for _ in range(3)))
    assert replies == ["yes"] * 3 and len(client.calls) == 1


async def test_judge_with_openai_style_client():
    client = FakeOpenAI("no")
    rubric = JudgeRubric(judge_client=client, judge_sampling_args={"max_tokens": 5}, funcs=[judged])
    state = make_state()
    await rubric.score_rollout(state)
    assert state["reward"] == 0.0 and state["metrics_errors"] == []
    [call] = client.calls
    assert call["model"] == "gpt-4.1-nano" and call["max_tokens"] == 5
    assert call["messages"][0]["role"] == "user" and "2+2?" in call["messages"][0]["content"]


async def test_judge_prompt_formatting_uses_parser_and_fallback():
    client = FakeChatClient()
    prompt = "Q={question}|A={answer}|R={response}"
    rubric = JudgeRubric(judge_client=client, judge_prompt=prompt, parser=Parser(lambda t: t.upper()))
    state = make_state(completion="four")
    await rubric.judge(state["prompt"], state["completion"], "4", state)
    assert client.calls[0]["messages"][0]["content"] == "Q=2+2?|A=4|R=FOUR"
    none_parser = Parser(lambda t: None)
    rubric = JudgeRubric(judge_client=client, judge_prompt=prompt, parser=none_parser)
    await rubric.judge("plain question", "raw text", "4")
    assert client.calls[1]["messages"][0]["content"] == "Q=plain question|A=4|R=raw text"
    await rubric.judge("q", [], "4")
    assert client.calls[2]["messages"][0]["content"] == "Q=q|A=4|R="


async def test_judge_class_objects_and_bad_prompt():
    client = FakeChatClient()
    rubric = JudgeRubric(judge_client=client, judge_model="m")
    assert rubric.class_objects["judge_client"] is client
    assert rubric.class_objects["judge_model"] == "m"
    assert rubric.class_objects["judge"] == rubric.judge
    assert rubric.class_objects["judge_prompt"] == DEFAULT_JUDGE_PROMPT
    with pytest.raises(RubricError, match="placeholders"):
        JudgeRubric(judge_client=client, judge_prompt="{question} {score}")


async def test_judge_failure_is_recorded_not_silent():
    class Down:
        async def chat(self, messages, *, model, tools=None, sampling_args=None):
            raise ConnectionError("judge unreachable")

    rubric = JudgeRubric(judge_client=Down(), funcs=[judged])
    state = make_state()
    await rubric.score_rollout(state)
    assert state["reward"] == 0.0
    assert state["metrics_errors"] == [{"func": "judged", "type": "ConnectionError", "message": "judge unreachable"}]
    assert state["judge_response"] == {}


async def test_judge_lazily_creates_openai_client(monkeypatch):
    created: list[FakeOpenAI] = []

    def factory():
        created.append(FakeOpenAI("yes"))
        return created[-1]

    monkeypatch.setitem(sys.modules, "openai", types.SimpleNamespace(AsyncOpenAI=factory))
    rubric = JudgeRubric(funcs=[judged])
    assert created == []
    state = make_state()
    await rubric.score_rollout(state)
    assert state["reward"] == 1.0 and len(created) == 1
    assert rubric.class_objects["judge_client"] is created[0]


def test_importing_envs_does_not_import_openai():
    import os
    import subprocess
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    code = "import sys, prime_cli.envs; assert 'openai' not in sys.modules"
    env = {**os.environ, "PYTHONPATH": root}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env=env)
