"""math-python rollouts/s through `prime eval run`, as a user runs it, against a scripted server whose
model calls the python tool once (honest code) and then answers: the old in-process worker (math-python
as it was at OLD_COMMIT, put in a scratch workspace's environments/ folder, which wins over the installed
package) beside today's environment under each provider that runs here. Used by sandbox_bench.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_COMMIT = "36a8ae7"  # the last commit with the child-interpreter worker (sandbox.py, sandbox_worker.py)
PRIME = Path(sys.executable).with_name("prime")
DATA = REPO.parent / "shared" / "data"


def tool_then_answer(request: dict) -> str | dict:
    tools = [m for m in request["messages"] if m.get("role") == "tool"]
    if not tools:
        code = "import sympy\nx = sympy.Symbol('x')\nprint(sympy.solve(x * 3 - 21, x)[0])"
        return {"tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "python", "arguments": json.dumps({"code": code})}}]}
    return f"The answer is \\boxed{{{tools[-1]['content'].strip()}}}"


def old_workspace() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="prime-bench-old-"))
    target = folder / "environments" / "math_python"
    target.mkdir(parents=True)
    listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", OLD_COMMIT,
                              "environments/math_python/"], capture_output=True, text=True, check=True).stdout.split()
    for name in listing:
        content = subprocess.run(["git", "-C", str(REPO), "show", f"{OLD_COMMIT}:{name}"], capture_output=True,
                                 check=True).stdout
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return folder


def timed_eval(cwd: Path, url: str, rollouts: int, concurrency: int, sandbox: str | None) -> tuple[float, str]:
    examples = max(rollouts // 2, 1)
    argv = [str(PRIME), "eval", "run", "math-python", "-m", "scripted", "-b", url, "-n", str(examples), "-r", "2",
            "-c", str(concurrency), "-o", str(cwd / "out")]
    if sandbox:
        argv += ["--sandbox", sandbox]
    env = {**os.environ, "PRIME_DATA_DIR": str(DATA), "OPENAI_API_KEY": "unused"}
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        return float("nan"), (done.stderr or done.stdout).strip().splitlines()[-1][:200]
    reward = next((line for line in done.stdout.splitlines() if line.startswith("Reward:")), "")
    return examples * 2 / wall, reward.strip()[:80]


def rollout_table(rollouts: int, concurrency: int) -> None:
    sys.path.insert(0, str(REPO))
    from sandbox_bench import unavailable

    from tests.support.scripted_server import ScriptedOpenAIServer

    print(f"\nmath-python through `prime eval run`, {rollouts} rollouts (one python call each), -c {concurrency}")
    print(f"{'worker':28} {'rollouts/s':>10}  reward line")
    with ScriptedOpenAIServer(reply=tool_then_answer) as server:
        url = server.url
        old = old_workspace()
        try:
            rate, note = timed_eval(old, url, rollouts, concurrency, None)
            print(f"{'old child interpreter':28} {rate:10.2f}  {note}")
        finally:
            shutil.rmtree(old, ignore_errors=True)
        for provider in ("bwrap", "podman", "docker", "none"):
            reason = unavailable(provider)
            if reason:
                print(f"{provider:28} skipped: {reason}")
                continue
            scratch = Path(tempfile.mkdtemp(prefix="prime-bench-new-"))
            try:
                rate, note = timed_eval(scratch, url, rollouts, concurrency, provider)
                print(f"{'PythonEnv on ' + provider:28} {rate:10.2f}  {note}")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
