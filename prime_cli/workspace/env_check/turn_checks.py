"""Tool and multi-turn environments: the tools' schemas are valid, and `env_response` answers one
scripted turn (a tool call for a tool environment, a reply for a multi-turn one)."""

from __future__ import annotations

import json
import re
from typing import Any

from prime_cli.envs.multiturn_env import MultiTurnEnv, maybe_await
from prime_cli.envs.singleturn_env import SingleTurnEnv
from prime_cli.envs.tool_env import ToolEnv

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
DUMMY_VALUES = {"string": "test", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def schema_problems(schemas: list[dict[str, Any]]) -> list[str]:
    problems = []
    for schema in schemas or []:
        function = schema.get("function") if isinstance(schema, dict) else None
        name = (function or {}).get("name", "?") if isinstance(function, dict) else "?"
        if not isinstance(function, dict) or schema.get("type") != "function":
            problems.append(f"tool schema {name}: needs type 'function' and a 'function' object")
            continue
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            problems.append(f"tool {name!r}: the name must be 1-64 letters, digits, '_' or '-'")
        params = function.get("parameters")
        if not isinstance(params, dict) or params.get("type") != "object":
            problems.append(f"tool {name}: parameters must be a JSON schema of type 'object'")
            continue
        properties = params.get("properties") or {}
        if not isinstance(properties, dict):
            problems.append(f"tool {name}: parameters.properties must be an object")
            continue
        missing = [r for r in params.get("required") or [] if r not in properties]
        if missing:
            problems.append(f"tool {name}: required names {missing} that are not among its parameters")
        untyped = [p for p, s in properties.items() if not isinstance(s, dict) or not ({"type", "anyOf", "oneOf", "enum", "$ref"} & set(s))]
        if untyped:
            problems.append(f"tool {name}: parameters {untyped} have no type")
    return problems


def schema_notes(schemas: list[dict[str, Any]]) -> list[str]:
    return [f"tool {s['function']['name']} has no description: the model sees only its name"
            for s in schemas or [] if isinstance(s.get("function"), dict) and not s["function"].get("description")]


def dummy_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    params = schema["function"].get("parameters") or {}
    properties = params.get("properties") or {}
    return {name: DUMMY_VALUES.get(spec.get("type") if isinstance(spec, dict) else None, "test")
            for name, spec in properties.items() if name in (params.get("required") or properties)}


async def scripted_turn_problems(env: Any, rows: list[dict[str, Any]], replies: list[dict[str, str | None]]) -> tuple[list[str], list[str]]:
    """(problems, notes) of calling env_response once after a scripted assistant turn."""
    if not isinstance(env, MultiTurnEnv) or isinstance(env, SingleTurnEnv) or not rows:
        return [], []
    if isinstance(env, ToolEnv):
        if not env.oai_tools:
            return [], ["the tool environment has no tools"]
        schema = env.oai_tools[0]
        name = schema["function"]["name"]
        call = {"id": "check-1", "type": "function",
                "function": {"name": name, "arguments": json.dumps(dummy_arguments(schema))}}
        turn = {"role": "assistant", "content": "", "tool_calls": [call]}
        return await _one_turn(env, rows[0], turn, expect_tool=name), []
    for row, kinds in zip(rows, replies, strict=True):
        text = kinds.get("other_answer") or kinds.get("reference") or ""
        turn = {"role": "assistant", "content": text}
        state = await _started(env, row, turn)
        if await env._should_stop(state):
            await env._run_cleanups(state)
            continue
        return await _one_turn(env, row, turn, state=state), []
    return [], ["env_response was not called: every scripted first turn ended the rollout"]


async def _started(env: Any, row: dict[str, Any], turn: dict[str, Any]) -> Any:
    state = env.init_state(row)
    state = await maybe_await(env.setup_state(state)) or state
    state["completion"] = [turn]
    state["turn"] = 1
    return state


async def _one_turn(env: Any, row: dict[str, Any], turn: dict[str, Any], expect_tool: str | None = None,
                    state: Any = None) -> list[str]:
    where = f"env_response on a scripted {'call of tool ' + expect_tool if expect_tool else 'turn'}"
    try:
        state = state or await _started(env, row, turn)
        reply = await maybe_await(env.env_response(state["prompt"] + state["completion"], state))
    except Exception as exc:
        return [f"{where} raised {type(exc).__name__}: {exc}"]
    finally:
        if state is not None:
            await env._run_cleanups(state)
    if isinstance(reply, tuple):  # verifiers' older (messages, state)
        reply = reply[0]
    if not isinstance(reply, list) or not all(isinstance(m, dict) and "role" in m for m in reply):
        return [f"{where} returned {type(reply).__name__}, not a list of messages"]
    if expect_tool and not any(m.get("role") == "tool" and m.get("tool_call_id") == "check-1" for m in reply):
        return [f"{where} returned no tool message answering the call"]
    return []
