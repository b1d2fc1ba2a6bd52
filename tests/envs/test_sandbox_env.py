"""SandboxEnv under real bubblewrap: the bash tool runs in the rollout's own sandbox, hooks see it,
failures of the sandbox are errored rollouts (never a reward of 0), nothing stays open."""

import os

import pytest

import prime_cli.envs as vf
from prime_cli.sandbox import LIVE, SandboxError, get_provider
from prime_cli.sandbox.bwrap import BwrapProvider
from tests.support.scripted_client import ScriptedClient, tool_call

BWRAP = get_provider("bwrap").unavailable_reason()
pytestmark = pytest.mark.skipif(BWRAP is not None, reason=f"bwrap cannot run here: {BWRAP}")
ROWS = [{"question": "fix it", "answer": "x"}]


def bash(*commands):
    return [{"content": None, "tool_calls": [tool_call("bash", {"command": c}, f"call_{i}")]} for i, c in enumerate(commands)]


def open_sandboxes():
    return [s for s in LIVE if not s.closed]


class Recording(vf.SandboxEnv):
    def __init__(self, **kwargs):
        self.seen = []

        def passed(state) -> float:
            return float(state.get("grade", 0))

        super().__init__(eval_dataset=ROWS, rubric=vf.Rubric(funcs=[passed]), timeout_per_command_seconds=2, **kwargs)

    async def setup_sandbox(self, sandbox, state):
        await sandbox.write_file("repo/value.txt", "1\n")

    async def post_rollout(self, sandbox, state):
        result = await sandbox.exec("cat repo/value.txt")
        self.seen.append((sandbox.closed, result.stdout.strip()))
        state["grade"] = result.stdout.strip() == "2"


async def run(env, script, n=1):
    return await env.run_group(ScriptedClient(script), "m", env.get_eval_dataset()[0], n=n)


async def test_bash_runs_in_the_sandbox_and_post_rollout_sees_it_before_close():
    env = Recording()
    state, = await run(env, bash("cat repo/value.txt; id -u; pwd", "echo 2 > repo/value.txt") + ["done"])
    value, uid, cwd = state["completion"][1]["content"].splitlines()
    assert value == "1" and cwd == "/sandbox" and (uid == "65534" or os.geteuid() != 0)
    assert env.seen == [(False, "2")] and state["reward"] == 1.0 and state["error"] is None
    assert state["sandbox"]["provider"] == "bwrap"
    assert open_sandboxes() == [] and env._rollouts == {}


async def test_post_rollout_starts_the_sandbox_when_the_model_never_called_a_tool():
    env = Recording()
    state, = await run(env, ["I give up"])
    assert env.seen == [(False, "1")] and state["reward"] == 0.0 and state["error"] is None
    assert open_sandboxes() == []


async def test_nonzero_exit_timeout_and_dropped_output_go_back_to_the_model():
    env = Recording(max_output_bytes=100)
    state, = await run(env, bash("echo out; echo err >&2; exit 3", "sleep 30", "yes | head -c 5000") + ["done"])
    replies = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert replies[0] == "out\nstderr:\nerr\n[exit code 3]"
    assert "timed out after 2 s" in replies[1]
    assert "more bytes of stdout were dropped" in replies[2] and "4900" in replies[2]
    assert state["error"] is None and state.get("tool_errors") is None


async def test_each_rollout_has_its_own_sandbox():
    env = Recording()
    states = await run(env, lambda messages, tools, args: (
        bash("echo 2 > repo/value.txt; hostname; ls /sandbox")[0] if len(messages) < 3 else "done"), n=3)
    assert len({s["sandbox"]["id"] for s in states}) == 3 and all(s["reward"] == 1.0 for s in states)
    assert open_sandboxes() == []


async def test_a_sandbox_that_cannot_start_is_an_errored_rollout_after_retries(monkeypatch):
    attempts = []

    async def failing(self, spec):
        attempts.append(spec)
        raise SandboxError("bwrap: simulated start failure")

    monkeypatch.setattr(BwrapProvider, "_start", failing)
    env = Recording(max_retries=2, base_delay=0.01)
    state, = await run(env, bash("true") + ["done"])
    assert len(attempts) == 3
    assert state["error"]["type"] == "InfraError" and "simulated start failure" in state["error"]["message"]
    assert "3 attempts" in state["error"]["message"] and state["is_completed"] is False
    assert env.seen == [] and open_sandboxes() == []


async def test_a_sandbox_that_dies_mid_rollout_ends_it_as_an_infra_error():
    class Dies(Recording):
        async def bash(self, command, sandbox_id):
            sandbox = await self.get_sandbox(sandbox_id)
            await sandbox.close()  # as if it died
            return await super().bash(command, sandbox_id)

    env = Dies()
    state, = await run(env, bash("true") + ["done"])
    assert state["error"]["type"] == "InfraError" and "closed" in state["error"]["message"]
    assert env.seen == [] and open_sandboxes() == []


def test_constructor_names_map_onto_the_spec():
    env = vf.SandboxEnv(eval_dataset=ROWS, docker_image="img:1", start_command="tail -f /dev/null", cpu_cores=2,
                        memory_gb=1.5, disk_size_gb=2, timeout_minutes=5, timeout_per_command_seconds=7,
                        environment_vars={"A": "1"}, labels=["demo"], sandbox_provider="podman")
    spec = env.get_sandbox_spec()
    assert (spec.image, spec.start_command, spec.cpus, spec.memory_mb, spec.disk_mb, spec.timeout_s, spec.command_timeout_s) == \
        ("img:1", None, 2.0, 1536, 2048, 300.0, 7.0)
    assert spec.env == {"A": "1"} and spec.labels["prime.tag.demo"] == "1" and spec.network is False
    assert env.sandbox_provider == "podman"
    assert [t["function"]["name"] for t in env.oai_tools] == ["bash"]
    assert list(env.oai_tools[0]["function"]["parameters"]["properties"]) == ["command"]
