import asyncio

import prime_cli.envs as vf
from tests.support.scripted_client import ScriptedClient, tool_call

ROWS = [{"question": "What is 6*7?", "answer": "42"}]


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


async def lookup(key: str) -> str:
    """Look a key up in the store."""
    await asyncio.sleep(0)
    return f"value-of-{key}"


def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


class Fatal(Exception):
    pass


def fatal() -> str:
    """Fails in a way that must end the rollout."""
    raise Fatal("sandbox died")


def make_env(**kwargs):
    return vf.ToolEnv(dataset=ROWS, tools=[multiply, lookup, explode, fatal], **kwargs)


def test_tool_schemas_are_offered_to_the_model():
    env = make_env()
    names = [t["function"]["name"] for t in env.oai_tools]
    assert names == ["multiply", "lookup", "explode", "fatal"]
    params = env.oai_tools[0]["function"]["parameters"]
    assert params["properties"]["a"]["type"] == "integer" and params["required"] == ["a", "b"]


async def test_sync_and_async_tools_results_go_back_as_tool_messages():
    env = make_env()
    client = ScriptedClient([
        {"content": None, "tool_calls": [tool_call("multiply", {"a": 6, "b": 7}, "c1"), tool_call("lookup", {"key": "k"}, "c2")]},
        "The answer is 42",
    ])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    tool_msgs = [m for m in state["completion"] if m["role"] == "tool"]
    assert tool_msgs == [
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        {"role": "tool", "content": "value-of-k", "tool_call_id": "c2"},
    ]
    assert state["stop_condition"] == "no_tools_called" and state["turn"] == 2
    assert client.calls[0]["tools"] == env.oai_tools


async def test_raising_tool_bad_json_unknown_tool_and_bad_args_become_error_messages():
    env = make_env()
    client = ScriptedClient([
        {"content": None, "tool_calls": [
            tool_call("explode", {"reason": "x"}, "c1"),
            tool_call("multiply", "{not json", "c2"),
            tool_call("nope", {}, "c3"),
            tool_call("multiply", {"a": 1}, "c4"),
        ]},
        "giving up",
    ])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    contents = {m["tool_call_id"]: m["content"] for m in state["completion"] if m["role"] == "tool"}
    assert contents["c1"] == "Error: RuntimeError: boom: x"
    assert contents["c2"].startswith("Error: ToolParseError: arguments of multiply are not valid JSON")
    assert "unknown tool 'nope'" in contents["c3"] and "multiply" in contents["c3"]
    assert contents["c4"].startswith("Error: TypeError")
    assert state["error"] is None and [e["type"] for e in state["tool_errors"]] == [
        "RuntimeError", "ToolParseError", "ToolCallError", "TypeError"]


async def test_stop_errors_end_the_rollout_with_the_error_recorded():
    env = make_env(stop_errors=[Fatal])
    client = ScriptedClient([{"content": None, "tool_calls": [tool_call("fatal", {}, "c1")]}, "unreachable"])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    assert state["error"] == {"type": "Fatal", "message": "sandbox died"}
    assert len(client.calls) == 1


async def test_custom_error_formatter_and_max_turns():
    env = make_env(max_turns=3, error_formatter=lambda e: f"oops {e}")
    always_calls = {"content": None, "tool_calls": [tool_call("explode", {"reason": "r"}, "c")]}
    state = await env.rollout(ScriptedClient([always_calls]), "m", env.get_dataset()[0])
    assert state["turn"] == 3 and state["stop_condition"] == "max_turns_reached" and state["is_truncated"]
    assert state["completion"][1]["content"] == "oops boom: r"


class SessionEnv(vf.StatefulToolEnv):
    def __init__(self, **kwargs):
        super().__init__(dataset=ROWS, **kwargs)
        self.add_tool(self.run_code, args_to_skip=["session_id"])

    async def setup_state(self, state, **kwargs):
        state["session_id"] = f"s-{state['example_id']}"
        return state

    def run_code(self, code: str, session_id: str) -> str:
        """Run code in the rollout's session."""
        return f"{session_id}:{code}"

    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):
        return {**tool_args, "session_id": state["session_id"]}


async def test_stateful_tool_env_hides_and_injects_arguments():
    env = SessionEnv()
    schema = env.oai_tools[0]["function"]["parameters"]
    assert list(schema["properties"]) == ["code"]
    client = ScriptedClient([{"content": None, "tool_calls": [tool_call("run_code", {"code": "1+1"}, "c1")]}, "done"])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    assert state["completion"][1]["content"] == "s-0:1+1"
