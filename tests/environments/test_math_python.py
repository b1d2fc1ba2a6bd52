"""math-python: the sandbox contains what a model's code can do wrong; rewards; per-rollout state."""

import os
import socket
import threading
from pathlib import Path

import pytest
from math_python import MathPythonEnv, PythonSandbox, SandboxLimits

import prime_cli.envs as vf
from tests.environments.conftest import data_root
from tests.support.scripted_client import ScriptedClient, tool_call

FAST = SandboxLimits(wall_seconds=4, cpu_seconds=1, session_cpu_seconds=30, memory_mb=512, max_output_bytes=2000)


@pytest.fixture
def sandbox():
    box = PythonSandbox(FAST)
    yield box
    box.close()


def survives(box):
    """The host is fine and the sandbox still answers."""
    result = box.run("6 * 7")
    return result.ok and result.output.strip() == "42"


def test_infinite_loop_is_stopped_by_the_cpu_limit_and_state_is_kept(sandbox):
    sandbox.run("kept = 'yes'")
    result = sandbox.run("while True:\n    pass")
    assert "CPUTimeExceeded" in result.error and not result.restarted
    assert sandbox.run("kept").output.strip() == "'yes'" and survives(sandbox)


def test_a_blocking_call_is_killed_at_the_wall_clock_limit(sandbox):
    sandbox.run("kept = 1")
    result = sandbox.run("import time\ntime.sleep(60)")
    assert "TimeoutError" in result.error and result.restarted
    assert "NameError" in sandbox.run("kept").error  # a fresh interpreter
    assert survives(sandbox)


def test_fork_bomb_is_refused(sandbox):
    result = sandbox.run("import os\nwhile True:\n    os.fork()")
    assert "PermissionError" in result.error and "starting processes" in result.error
    for code in ("import subprocess; subprocess.run(['true'])", "import os; os.system('true')",
                 "import multiprocessing; multiprocessing.Process(target=print).start()"):
        assert "PermissionError" in sandbox.run(code).error, code
    assert survives(sandbox)


def test_a_10_gb_allocation_fails_inside_the_sandbox(sandbox):
    result = sandbox.run("big = bytearray(10 * 1024 ** 3)")
    assert "MemoryError" in result.error and not result.restarted
    assert survives(sandbox)


def test_writing_outside_its_directory_is_refused(sandbox, tmp_path):
    target = tmp_path / "escaped.txt"
    for code in (f"open({str(target)!r}, 'w').write('x')", f"import os; os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)",
                 "open('../escaped.txt', 'w').write('x')", f"import shutil; shutil.rmtree({str(tmp_path)!r})",
                 "import os; os.symlink('/etc', 'link'); open('link/evil', 'w')"):
        assert "PermissionError" in sandbox.run(code).error, code
    assert not target.exists() and tmp_path.is_dir()
    assert not (Path(sandbox.root).parent / "escaped.txt").exists()
    inside = sandbox.run("open('notes.txt', 'w').write('ok'); open('notes.txt').read()")
    assert inside.ok and "'ok'" in inside.output and (Path(sandbox.root) / "notes.txt").is_file()


def test_opening_a_network_socket_is_refused(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        result = sandbox.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)")
        assert "PermissionError" in result.error and "network" in result.error
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    finally:
        listener.close()
    assert survives(sandbox)


def test_printing_100_mb_is_capped_while_reading(sandbox):
    result = sandbox.run("print('x' * 100_000_000)")
    assert len(result.output) <= FAST.max_output_bytes and result.dropped_bytes > 99_000_000
    raw = sandbox.run("import sys\nfor _ in range(100):\n    sys.__stdout__.buffer.raw.write(b'y' * 1_000_000)")
    assert len(raw.output) <= FAST.max_output_bytes and raw.dropped_bytes >= 99_000_000
    assert survives(sandbox)


def test_signals_to_the_host_and_secrets_in_the_environment_do_not_reach_it(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    box = PythonSandbox(FAST)
    try:
        assert "PermissionError" in box.run("import os; os.kill(os.getppid(), 9)").error
        assert box.run("import os; os.environ.get('OPENAI_API_KEY')").output.strip() == ""  # None prints nothing
    finally:
        box.close()


def test_close_kills_the_interpreter_and_removes_its_directory():
    box = PythonSandbox(FAST)
    assert box.run("1").ok
    pid, root = box._proc.pid, box.root
    box.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not os.path.exists(root)
    box.close()  # twice is fine


# -- the environment --------------------------------------------------------------------------------


@pytest.fixture
def env():
    return vf.load_environment("math-python", data_dir=str(data_root() / "gsm8k"), num_eval_examples=3,
                               timeout_seconds=4, cpu_seconds=1)


def calls(*codes):
    return [{"content": None, "tool_calls": [tool_call("python", {"code": c}, f"call_{i}")]} for i, c in enumerate(codes)]


async def test_state_persists_within_a_rollout_and_is_destroyed_after(env):
    row = env.get_eval_dataset()[0]
    assert row["answer"] == "18"
    script = calls("eggs = 16 - 3 - 4", "eggs * 2", "import os\nos.fork()") + ["So \\boxed{18}"]
    seen_roots = []
    original = PythonSandbox._start

    def spy(self):
        original(self)
        seen_roots.append(self.root)

    PythonSandbox._start = spy
    try:
        state = (await env.run_group(ScriptedClient(script), "m", row, n=1))[0]
    finally:
        PythonSandbox._start = original
    tools = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert tools[1].strip() == "18" and "PermissionError" in tools[2] and tools[2].startswith("Error:")
    assert state["metrics"] == {"correct_answer": 1.0, "tool_calls": 3.0, "tool_errors": 1.0}
    assert len(seen_roots) == 1 and not os.path.exists(seen_roots[0]) and env.sandboxes == {}


async def test_rollouts_do_not_share_an_interpreter(env):
    row = env.get_eval_dataset()[0]

    def script(messages, tools, sampling_args):
        done = [m for m in messages if m["role"] == "tool"]
        if not done:
            return calls("secret = id(object())\ntry:\n    seen\nexcept NameError:\n    seen = 'fresh'\nseen")[0]
        return f"\\boxed{{{'18' if 'fresh' in done[0]['content'] else '0'}}}"

    states = await env.run_group(ScriptedClient(script), "m", row, n=3)
    assert [s["metrics"]["correct_answer"] for s in states] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("reply, reward", [("\\boxed{18}", 1.0), ("\\boxed{17}", 0.0), ("18", 0.0)])
async def test_answer_reward_on_right_wrong_and_malformed(env, reply, reward):
    state = (await env.run_group(ScriptedClient([reply]), "m", env.get_eval_dataset()[0], n=1))[0]
    assert state["reward"] == reward and state["metrics"]["tool_calls"] == 0.0


def test_missing_data_is_a_clear_config_error(monkeypatch):
    monkeypatch.delenv("PRIME_DATA_DIR", raising=False)
    with pytest.raises(vf.EnvConfigError, match="PRIME_DATA_DIR"):
        vf.load_environment("math-python")


def test_tool_schema_hides_the_injected_sandbox_id(env):
    assert isinstance(env, MathPythonEnv)
    schema = env.oai_tools[0]["function"]
    assert schema["name"] == "python" and list(schema["parameters"]["properties"]) == ["code"]


def test_many_sandboxes_at_once_from_threads():
    boxes = [PythonSandbox(FAST) for _ in range(4)]
    results = [None] * 4

    def work(i):
        results[i] = boxes[i].run(f"{i} * 10").output.strip()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for box in boxes:
        box.close()
    assert results == ["0", "10", "20", "30"]
