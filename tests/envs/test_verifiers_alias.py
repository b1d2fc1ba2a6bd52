"""`import verifiers` inside prime resolves to prime's environment API; the environment's source is not changed.

The environment below is our own, written the way verifiers 0.1.10+ users write them: imports from verifiers'
modules, message objects read as attributes, verifiers' trajectory keys, `is_completed(self, state)`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prime_cli.envs import verifiers_alias
from prime_cli.envs.chat_messages import ChatMessage, ToolCall, UserMessage, openai_tool
from prime_cli.envs.loader import load_environment
from tests.support.scripted_client import ScriptedClient, tool_call

VERIFIERS_SOURCE = textwrap.dedent('''
    import verifiers as vf
    from verifiers.types import Messages, State
    from verifiers.utils.data_utils import BOXED_SYSTEM_PROMPT, extract_boxed_answer
    from verifiers.rubrics.math_rubric import MathRubric
    from verifiers.envs.multiturn_env import MultiTurnEnv
    from verifiers.utils.async_utils import maybe_await


    def lookup(city: str) -> str:
        """The population of a city.

        Args:
            city: its name.
        """
        return "18"


    class AskTwice(MultiTurnEnv):
        async def is_completed(self, state: State, **kwargs) -> bool:
            if await super().is_completed(state):
                return True
            return len(state["trajectory"]) >= 2

        async def env_response(self, messages: Messages, state: State, **kwargs) -> Messages:
            # an extra model call the OpenAI SDK's way, through the rollout's own client and model
            critic = await state["client"].chat.completions.create(
                model=state["model"], messages=[{"role": "user", "content": "critique: " + messages[-1].content}])
            state["critique"] = critic.choices[0].message.content
            return [vf.UserMessage(content="Are you sure?")]


    def last_reply_boxed(completion, **kwargs) -> float:
        return float(bool(extract_boxed_answer(completion[-1].content, strict=True)))


    def steps_read_as_verifiers_does(state, **kwargs) -> float:
        step = state["trajectory"][-1]
        return float(step["completion"][-1].role == "assistant" and step["prompt"][0]["role"] == "system")


    async def called_lookup(completion, **kwargs) -> float:
        calls = [c for m in completion if m.role == "assistant" for c in (m.tool_calls or [])]
        return float(any(c.name == "lookup" and "city" in c.arguments for c in calls))


    def load_environment(**kwargs):
        rows = [{"question": "What is 9 + 9?", "answer": "18"}]
        rubric = MathRubric(funcs=[last_reply_boxed, steps_read_as_verifiers_does], weights=[0.5, 0.5])
        ask = AskTwice(dataset=rows, system_prompt=BOXED_SYSTEM_PROMPT, parser=rubric.parser, rubric=rubric)
        tools = vf.ToolEnv(dataset=rows, tools=[lookup], max_turns=3, rubric=vf.Rubric(funcs=[called_lookup]))
        return vf.EnvGroup(envs=[ask, tools], env_names=["ask", "tools"])
''')


@pytest.fixture()
def verifiers_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "environments" / "ask_twice"
    folder.mkdir(parents=True)
    (folder / "ask_twice.py").write_text(VERIFIERS_SOURCE)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in [n for n in sys.modules if n == "ask_twice"]:
        del sys.modules[name]


def policy(messages, tools, sampling_args):
    if messages[-1]["content"].startswith("critique: "):
        return "looks fine"
    if tools and messages[-1]["role"] != "tool":
        return {"role": "assistant", "content": None, "tool_calls": [tool_call("lookup", {"city": "Oslo"})]}
    return "Let me think. \\boxed{18}"


def test_a_verifiers_environment_runs_as_written(verifiers_env: Path) -> None:
    env = load_environment("ask-twice")
    rows = env.get_eval_dataset()
    by_task = {row["task"]: row for row in rows}

    async def run(task: str):
        return await env.run_group(ScriptedClient(policy), "m", by_task[task], n=1)

    [ask] = asyncio.run(run("ask"))
    assert ask["error"] is None and ask["metrics_errors"] == []
    assert len(ask["trajectory"]) == 2, "is_completed(self, state) ended the rollout after the second reply"
    assert ask["completion"][1] == {"role": "user", "content": "Are you sure?"}
    assert ask["critique"] == "looks fine" and ask["model"] == "m"
    assert {k: ask["metrics"][k] for k in ("last_reply_boxed", "steps_read_as_verifiers_does", "correct_answer")} == {
        "last_reply_boxed": 1.0, "steps_read_as_verifiers_does": 1.0, "correct_answer": 1.0}
    [tools] = asyncio.run(run("tools"))
    assert tools["error"] is None and tools["metrics_errors"] == []
    assert tools["metrics"]["called_lookup"] == 1.0
    json.dumps([ask["completion"], tools["completion"]])  # the message objects save as plain JSON


def test_a_module_or_name_prime_does_not_have_says_so() -> None:
    verifiers_alias.install()
    with pytest.raises(ImportError) as module_error:
        __import__("verifiers.envs.experimental.gym_env")
    assert module_error.value.name == "verifiers.envs.experimental"
    assert "prime does not provide verifiers.envs.experimental" in str(module_error.value)
    import verifiers

    with pytest.raises(AttributeError, match="prime does not provide verifiers.GymEnv") as name_error:
        verifiers.GymEnv  # noqa: B018
    assert name_error.value.name == "verifiers.GymEnv"
    with pytest.raises(ImportError, match="prime does not provide verifiers.v1.harnesses: prime runs verifiers' v1 "
                                          "tasksets"):
        __import__("verifiers.v1.harnesses.codex")
    import verifiers.v1 as v1

    with pytest.raises(AttributeError, match=r"verifiers.v1.EnvConfig \(an environment with several agent seats"):
        v1.EnvConfig  # noqa: B018


def test_an_installed_verifiers_is_not_used_inside_prime_and_is_untouched_outside(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "verifiers"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    code = textwrap.dedent('''
        import sys
        import verifiers
        print("before", getattr(verifiers, "REAL", False))
        from prime_cli.envs import verifiers_alias
        verifiers_alias.install()
        import verifiers
        print("after", getattr(verifiers, "REAL", False), verifiers.SingleTurnEnv.__module__)
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": f"{tmp_path / 'site'}:{Path.cwd()}", "PATH": "/usr/bin:/bin"})
    assert done.stdout.split("\n")[:2] == ["before True", "after False prime_cli.envs.singleturn_env"]


def test_messages_are_dicts_and_objects() -> None:
    message = ChatMessage({"role": "assistant", "content": None,
                           "tool_calls": [tool_call("lookup", {"city": "Oslo"}, "c1")]})
    call = message.tool_calls[0]
    assert isinstance(call, ToolCall)
    assert (call.name, call["name"], call.id, call["function"]["name"]) == ("lookup", "lookup", "c1", "lookup")
    assert json.loads(call.arguments) == {"city": "Oslo"} and call.get("arguments") == call.arguments
    assert message.content is None and message.reasoning_content is None
    assert message == {"role": "assistant", "content": None, "tool_calls": [tool_call("lookup", {"city": "Oslo"}, "c1")]}
    for clone in (copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert clone == message and clone.tool_calls[0].name == "lookup"
    with pytest.raises(AttributeError, match="no field 'colour'"):
        message.colour  # noqa: B018
    flat = ToolCall(id="c2", name="lookup", arguments={"city": "Rome"})
    assert flat["function"] == {"name": "lookup", "arguments": '{"city": "Rome"}'} and flat.type == "function"
    assert UserMessage(content="hi") == {"role": "user", "content": "hi"}
    assert openai_tool({"name": "f", "description": "d", "parameters": {}}) == {
        "type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}


def test_load_example_dataset_reads_a_local_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prime_cli.envs import DatasetError, load_example_dataset

    (tmp_path / "gsm8k").mkdir()
    records = [{"question": f"q{i}", "answer": f"work\n#### {i}"} for i in range(5)]
    (tmp_path / "gsm8k" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setenv("PRIME_DATA_DIR", str(tmp_path))
    rows = load_example_dataset("gsm8k", "test", n=3, seed=1)
    assert len(rows) == 3 and set(rows.column_names) == {"question", "answer"}
    assert all(row["answer"] == row["question"][1:] for row in rows)
    with pytest.raises(DatasetError, match="unknown dataset 'nope'"):
        load_example_dataset("nope")
