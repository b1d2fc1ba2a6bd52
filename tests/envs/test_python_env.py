"""PythonEnv under real bubblewrap: one persistent REPL per rollout, notebook cells, capped output,
CPU and wall limits (with restart), packages checked at start, nothing left open."""

import pytest

import prime_cli.envs as vf
from prime_cli.envs.python_env import module_names
from prime_cli.sandbox import LIVE, get_provider
from tests.support.scripted_client import ScriptedClient, tool_call

BWRAP = get_provider("bwrap").unavailable_reason()
pytestmark = pytest.mark.skipif(BWRAP is not None, reason=f"bwrap cannot run here: {BWRAP}")
ROWS = [{"question": "compute", "answer": "42"}]


def python(*codes):
    return [{"content": None, "tool_calls": [tool_call("python", {"code": c}, f"call_{i}")]} for i, c in enumerate(codes)]


def make(**kwargs):
    options = {"timeout_per_command_seconds": 3, "cpu_seconds_per_call": 1, "max_output_bytes": 500, **kwargs}
    return vf.PythonEnv(eval_dataset=ROWS, max_turns=12, **options)


async def replies(env, *codes):
    state, = await env.run_group(ScriptedClient([*python(*codes), "done"]), "m", env.get_eval_dataset()[0], n=1)
    assert not [s for s in LIVE if not s.closed] and env._rollouts == {}
    return state, [m["content"] for m in state["completion"] if m["role"] == "tool"]


async def test_variables_persist_and_a_final_expression_is_printed():
    state, out = await replies(make(), "x = 6 * 7", "x", "print('p'); x + 1", "import os; os.getcwd()", "None")
    assert out[0] == "(no output: print() values, or end the code with an expression)"
    assert out[1] == "42\n" and out[2] == "p\n43\n" and out[3] == "'/sandbox'\n"
    assert out[4].startswith("(no output") and state["error"] is None


async def test_errors_show_only_the_models_frames():
    _, out = await replies(make(), "def f():\n    return 1 / 0\nf()")
    assert out[0].startswith("Error: ToolCallError: Traceback") and "ZeroDivisionError" in out[0]
    assert "<cell 1>" in out[0] and "repl.py" not in out[0]


async def test_output_is_capped_and_the_dropped_bytes_counted():
    _, out = await replies(make(), "print('y' * 100_000)", "'still here'")
    assert "OutputLimitExceeded: only the first 500 bytes" in out[0] and "99501 more bytes were dropped" in out[0]
    assert out[1] == "'still here'\n"


async def test_cpu_limit_keeps_the_variables_and_wall_timeout_restarts_the_repl():
    _, out = await replies(make(), "kept = 1", "while True:\n    pass", "kept", "import time; time.sleep(30)", "kept", "2 + 2")
    assert "CPUTimeExceeded: the code used more than 1 s of CPU time" in out[1] and out[2] == "1\n"
    assert "TimeoutError: the code ran longer than 3 s" in out[3] and "variables are gone" in out[3]
    assert "restarted and earlier variables are gone" in out[4] and "NameError" in out[4]
    assert out[5] == "4\n"


async def test_a_repl_that_exits_is_restarted_and_the_model_told():
    _, out = await replies(make(), "v = 1", "import os; os._exit(0)", "v")
    assert "restarted and earlier variables are gone" in out[2] and "NameError" in out[2]


async def test_host_packages_import_under_bwrap_and_a_missing_one_is_an_infra_error():
    state, out = await replies(make(pip_install_packages="numpy sympy"), "import numpy; int(numpy.arange(4).sum())")
    assert out[0] == "6\n"
    state, out = await replies(make(pip_install_packages="numpy no-such-package-xyz"), "1")
    assert state["error"]["type"] == "InfraError" and out == []
    assert "no_such_package_xyz" in state["error"]["message"] and "install them in" in state["error"]["message"]


async def test_refuse_processes_is_a_friendly_message():
    _, out = await replies(make(refuse_processes=True), "import subprocess; subprocess.run(['true'])")
    assert "PermissionError" in out[0] and "not available here" in out[0]
    _, out = await replies(make(), "import subprocess; subprocess.run(['echo', 'hi'], capture_output=True).stdout")
    assert out[0] == "b'hi\\n'\n"  # without it, processes run (inside the sandbox)


def test_tools_and_package_names():
    assert [t["function"]["name"] for t in make().oai_tools] == ["python"]
    assert [t["function"]["name"] for t in make(keep_bash=True).oai_tools] == ["bash", "python"]
    assert module_names("numpy scikit-learn>=1.0 Pillow:PIL") == ["numpy", "scikit_learn", "PIL"]
