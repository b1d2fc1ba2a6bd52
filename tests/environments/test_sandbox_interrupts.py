"""Ctrl-C (twice: the first drains) and SIGKILL of `prime eval run` during 16 concurrent sandboxed rollouts leave nothing behind,
and `-R` resumes the run.

The scripted model's first tool call sleeps inside the sandbox, so all 16 sandboxes are alive when the
signal lands. What is left is listed from the host: processes and cgroup folders of the killed prime's
bwrap sandboxes, containers labelled with its pid. After a SIGKILL the sandboxed processes die with
their parent at once; the containers and empty cgroup folders a dead owner leaves are removed by the
next run's start (the resume), which is what a user does next.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time
from pathlib import Path

import pytest

from prime_cli.sandbox import get_provider
from tests.environments.conftest import data_root
from tests.evals.cli_support import only_run_dir, popen_prime, read_rows
from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

ROLLOUTS = 16


def provider_reason(name: str) -> str | None:
    if name != "bwrap" and importlib.util.find_spec("prime_cli.sandbox.containers") is None:
        return f"the {name} provider is not part of prime yet"
    return get_provider(name).unavailable_reason()


def slow_then_answer(state: dict):
    def reply(request):
        tools = [m for m in request["messages"] if m.get("role") == "tool"]
        if not tools:
            code = f"import time\ntime.sleep({state['sleep']})\nprint(7)"
            return {"tool_calls": [{"id": "c1", "type": "function",
                                    "function": {"name": "python", "arguments": json.dumps({"code": code})}}]}
        return f"\\boxed{{{tools[-1]['content'].strip()}}}"
    return reply


def bwrap_leftovers(owner: int) -> list[str]:
    """Processes in, and cgroup folders of, the sandboxes `owner` started."""
    tag = f"prime-sbx-{owner}-"
    found = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/**/{tag}*") if p.is_dir()]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag in (entry / "cgroup").read_text():
                    found.append(f"process {entry.name}: {(entry / 'cmdline').read_bytes()[:80]!r}")
            except OSError:
                pass
    return found


def container_leftovers(engine: str, owner: int) -> list[str]:
    from prime_cli.sandbox.inventory import containers

    return [f"{c.name} {c.status}" for c in containers(engine) if c.owner.endswith(f":{owner}")]


def leftovers(provider: str, owner: int) -> list[str]:
    return bwrap_leftovers(owner) if provider == "bwrap" else container_leftovers(provider, owner)


def live_sandboxes(provider: str, owner: int) -> int:
    if provider == "bwrap":
        tag = f"prime-sbx-{owner}-"
        return len({p.name for p in Path("/sys/fs/cgroup").glob(f"*/**/{tag}*") if p.is_dir()})
    return len(container_leftovers(provider, owner))


@pytest.mark.parametrize("provider", ["bwrap", "podman"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_interrupt_during_16_sandboxed_rollouts_leaves_nothing_and_resumes(tmp_path, provider, signum):
    if reason := provider_reason(provider):
        pytest.skip(reason)
    state = {"sleep": 60}
    env = {"PRIME_DATA_DIR": str(data_root())}
    args = ["eval", "run", "math-python", "-m", "scripted", "-n", str(ROLLOUTS // 2), "-r", "2", "-c", str(ROLLOUTS),
            "-s", "-a", '{"timeout_seconds": 90}', "--sandbox", provider]
    with ScriptedOpenAIServer(reply=slow_then_answer(state)) as server:
        args[5:5] = ["-b", server.url]
        proc = popen_prime(args, tmp_path, extra_env=env)
        deadline = time.monotonic() + 120
        while live_sandboxes(provider, proc.pid) < ROLLOUTS and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert live_sandboxes(provider, proc.pid) == ROLLOUTS, proc.communicate(timeout=30)
        time.sleep(1.0)  # every rollout is inside its tool call now
        proc.send_signal(signum)
        if signum == signal.SIGINT:  # the first Ctrl-C drains (the tool calls sleep a minute); the second stops now
            time.sleep(1.0)
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
        if signum == signal.SIGINT:
            assert proc.returncode == 1, out[-2000:] + err[-2000:]
            assert leftovers(provider, proc.pid) == [], "Ctrl-C left sandboxes behind"
        else:
            deadline = time.monotonic() + 10
            while provider == "bwrap" and any(s.startswith("process") for s in leftovers(provider, proc.pid)) \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not [s for s in leftovers(provider, proc.pid) if s.startswith("process")], \
                "a sandboxed process outlived its SIGKILLed prime"
        run_dir = only_run_dir(tmp_path)
        assert len(read_rows(run_dir)) < ROLLOUTS
        state["sleep"] = 0
        resumed = run_prime([*args, "-R", str(run_dir)], tmp_path, extra_env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    rows = read_rows(run_dir)
    assert sorted((r["example_id"], r["rollout_idx"]) for r in rows) == \
        sorted((e, i) for e in range(ROLLOUTS // 2) for i in range(2))
    assert all(r["reward"] is not None for r in rows)
    assert leftovers(provider, proc.pid) == [], "the next run did not remove what the killed one left"
    assert os.path.isdir(run_dir)
