"""math-python on PythonEnv: what a model's code can do wrong comes back as a tool error, rewards,
per-rollout sandboxes (bwrap by default) that are gone when the rollout ends."""

import pytest
from math_python import MathPythonEnv

import prime_cli.envs as vf
from prime_cli.sandbox import LIVE, get_provider
from tests.environments.conftest import data_root
from tests.support.scripted_client import ScriptedClient, tool_call

pytestmark = pytest.mark.skipif(get_provider("bwrap").unavailable_reason() is not None,
                                reason=f"bwrap cannot run here: {get_provider('bwrap').unavailable_reason()}")


def make_env(**limits):
    return vf.load_environment("math-python", data_dir=str(data_root() / "gsm8k"), num_eval_examples=3,
                               memory_mb=512, max_output_bytes=2000, **limits)


@pytest.fixture
def env():
    return make_env(timeout_seconds=4, cpu_seconds=1)


def calls(*codes):
    return [{"content": None, "tool_calls": [tool_call("python", {"code": c}, f"call_{i}")]} for i, c in enumerate(codes)]


async def run(env, script, n=1):
    return await env.run_group(ScriptedClient(script), "m", env.get_eval_dataset()[0], n=n)


def tool_replies(state):
    return [m["content"] for m in state["completion"] if m["role"] == "tool"]


async def test_state_persists_within_a_rollout_and_the_sandbox_is_closed_after(env):
    script = calls("eggs = 16 - 3 - 4", "eggs * 2", "import os\nos.fork()") + ["So \\boxed{18}"]
    state, = await run(env, script)
    tools = tool_replies(state)
    assert tools[1].strip() == "18"
    assert tools[2].startswith("Error:") and "PermissionError" in tools[2] and "not available here" in tools[2]
    assert state["metrics"] == {"correct_answer": 1.0, "tool_calls": 3.0, "tool_errors": 1.0}
    assert state["sandbox"]["provider"] == "bwrap" and state["error"] is None
    assert not [s for s in LIVE if not s.closed] and env._rollouts == {}


async def test_sympy_and_numpy_are_importable_inside():
    # Importing sympy costs about a CPU second on a slow 2-core machine: the default limits, not the 1 s test ones.
    env = make_env()
    state, = await run(env, calls("import sympy, numpy\nint(sympy.sqrt(324)), int(numpy.int64(18))") + ["\\boxed{18}"])
    assert tool_replies(state)[0].strip() == "(18, 18)" and state["reward"] == 1.0


async def test_an_infinite_loop_is_stopped_by_the_cpu_limit_and_state_is_kept(env):
    state, = await run(env, calls("kept = 'yes'", "while True:\n    pass", "kept") + ["\\boxed{18}"])
    tools = tool_replies(state)
    assert "CPUTimeExceeded" in tools[1] and tools[2].strip() == "'yes'"


async def test_a_blocking_call_is_killed_at_the_wall_clock_limit_and_the_repl_restarts(env):
    state, = await run(env, calls("kept = 1", "import time\ntime.sleep(60)", "kept", "6 * 7") + ["\\boxed{18}"])
    tools = tool_replies(state)
    assert "TimeoutError" in tools[1] and "variables are gone" in tools[1]
    assert "NameError" in tools[2] and tools[3].strip().endswith("42")
    assert state["error"] is None


async def test_printing_100_mb_is_capped(env):
    state, = await run(env, calls("print('x' * 100_000_000)", "6 * 7") + ["\\boxed{18}"])
    tools = tool_replies(state)
    assert "OutputLimitExceeded" in tools[0] and "bytes were dropped" in tools[0] and len(tools[0]) < 2500
    assert tools[1].strip() == "42"


async def test_a_10_gb_allocation_fails_inside_the_sandbox(env):
    state, = await run(env, calls("big = bytearray(10 * 1024 ** 3)", "6 * 7") + ["\\boxed{18}"])
    tools = tool_replies(state)
    assert "MemoryError" in tools[0] and tools[1].strip() == "42"


async def test_rollouts_do_not_share_an_interpreter(env):
    def script(messages, tools, sampling_args):
        done = [m for m in messages if m["role"] == "tool"]
        if not done:
            return calls("try:\n    seen\nexcept NameError:\n    seen = 'fresh'\nseen")[0]
        return f"\\boxed{{{'18' if 'fresh' in done[0]['content'] else '0'}}}"

    states = await env.run_group(ScriptedClient(script), "m", env.get_eval_dataset()[0], n=3)
    assert [s["metrics"]["correct_answer"] for s in states] == [1.0, 1.0, 1.0]
    assert len({s["sandbox"]["id"] for s in states}) == 3


@pytest.mark.parametrize("reply, reward", [("\\boxed{18}", 1.0), ("\\boxed{17}", 0.0), ("18", 0.0)])
async def test_answer_reward_on_right_wrong_and_malformed(env, reply, reward):
    state, = await run(env, [reply])
    assert state["reward"] == reward and state["metrics"]["tool_calls"] == 0.0
    assert "sandbox" not in state  # no tool call: no sandbox was started


def test_missing_data_is_a_clear_config_error(monkeypatch):
    monkeypatch.delenv("PRIME_DATA_DIR", raising=False)
    with pytest.raises(vf.EnvConfigError, match="PRIME_DATA_DIR"):
        vf.load_environment("math-python")


def test_tool_schema_hides_the_injected_sandbox_id(env):
    assert isinstance(env, MathPythonEnv) and isinstance(env, vf.PythonEnv)
    assert [t["function"]["name"] for t in env.oai_tools] == ["python"]
    schema = env.oai_tools[0]["function"]
    assert list(schema["parameters"]["properties"]) == ["code"]


def test_arguments_reach_the_sandbox_spec():
    env = vf.load_environment("math-python", data_dir=str(data_root() / "gsm8k"), timeout_seconds=7, memory_mb=768,
                              sandbox="none")
    spec = env.get_sandbox_spec()
    assert env.sandbox_provider == "none" and env.python_memory_mb == 768 and spec.memory_mb == 1024
    assert spec.command_timeout_s == 7 and spec.network is False and spec.image is None
