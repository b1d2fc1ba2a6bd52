"""The tool-call path of a ToolEnv on the real server.

SmolLM2 rarely calls tools unprompted, so the request sets `tool_choice` and the prompt carries one
worked example. (vLLM's hermes parser reads forced calls from the model's own `<tool_call>` text, so
on this model the example is what makes the forced call well-formed.)"""

from __future__ import annotations

import json

import prime_cli.envs as vf
from prime_cli.clients import EndpointSpec
from prime_cli.clients.openai_client import OpenAIChatClient

EMBEDDED = "SmolLM2-135M-Instruct"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


ONE_SHOT = [
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "5"},
    {"role": "assistant", "content": "5"},
]


async def test_forced_tool_call_runs_the_tool_and_returns_its_result(local_server):
    env = vf.ToolEnv(tools=[add], max_turns=2, dataset=[{"question": "What is 17 + 25?", "answer": "42"}],
                     system_prompt="Use the add tool for sums.", few_shot=ONE_SHOT)
    client = OpenAIChatClient(EndpointSpec("local", EMBEDDED, local_server.url, None), return_token_ids=True)
    sampling = {"max_tokens": 96, "temperature": 0.0, "tool_choice": "required"}
    (state,) = await env.run_group(client, EMBEDDED, env.get_eval_dataset()[0], n=1, sampling_args=sampling)
    assert state.get("error") is None, state.get("error")
    first_reply = state["trajectory"][0]["response"]
    (call,) = first_reply["tool_calls"]
    assert call["function"]["name"] == "add"
    arguments = json.loads(call["function"]["arguments"])
    assert set(arguments) == {"a", "b"} and all(isinstance(v, int) for v in arguments.values())
    tool_messages = [m for m in state["completion"] if m["role"] == "tool"]
    assert tool_messages and tool_messages[0]["content"] == str(arguments["a"] + arguments["b"])
    assert tool_messages[0]["tool_call_id"] == call["id"]
    # the second call saw the tool result rendered by our chat template and still got token ids back
    assert len(state["trajectory"]) == 2 and state["trajectory"][1]["prompt_token_ids"]
