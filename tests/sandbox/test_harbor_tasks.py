"""Harbor-format tasks under `prime eval run harbor` (issue 58), on podman and on docker: each task's
environment/Dockerfile is built with that engine (FROM the offline base image), a scripted agent works in
the container through the bash tool, and the reward is what tests/test.sh wrote.

tests/fixtures/harbor/ holds three tasks written for this test: create-file (the agent must create a
file), fix-test (a failing test the agent must fix in /app/calc.py), needs-package (the tests fail unless
the image installed a package: harborpkg, COPYed by the Dockerfile into site-packages).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.evals.cli_support import REPO, only_run_dir, read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

TASKS = REPO / "tests" / "fixtures" / "harbor"
COMMANDS = {"hello.txt": "echo 'hello harbor' > /app/hello.txt", "calc.py": "sed -i 's/a - b/a + b/' /app/calc.py",
            "harborpkg": "python3 -c 'import harborpkg; print(harborpkg.GREETING)'"}


def worker(body: dict) -> str | dict:
    """Runs the one command its task needs, then says it is done."""
    messages = body["messages"]
    if any(m["role"] == "tool" for m in messages):
        return "Done."
    task = next(m["content"] for m in messages if m["role"] == "user")
    command = next(c for key, c in COMMANDS.items() if key in task)
    return {"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash",
                                                                        "arguments": json.dumps({"command": command})}}]}


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_harbor_tasks_build_their_image_run_the_agent_and_score_with_their_tests(engine, container_image, tmp_path):
    container_image(engine)  # the base image the Dockerfiles build FROM (or a skip naming why the engine cannot run)
    args = ["eval", "run", "harbor", "-m", "m", "-n", "3", "-r", "1", "-s", "--sandbox", engine,
            "-a", json.dumps({"path": str(TASKS)})]
    results = {}
    for name, reply in (("worker", worker), ("idle", lambda body: "Done.")):
        cwd = tmp_path / name
        cwd.mkdir()
        with ScriptedOpenAIServer(reply) as server:
            result = run_prime([*args, "-b", server.url], cwd, timeout=600)
        assert result.returncode in (0, 1), result.stderr  # 1: a reward-diversity note is no failure
        rows = read_rows(only_run_dir(cwd))
        results[name] = {r["info"]["task_idx"]: r for r in rows}
        assert all(not r["error"] for r in rows), [r["error"] for r in rows]
    worked, idle = results["worker"], results["idle"]
    # sorted task folders: create-file, fix-test, needs-package
    assert [worked[i]["reward"] for i in range(3)] == [1.0, 1.0, 1.0]
    assert "hello from the image" in worked[2]["completion"][1]["content"]  # the tool ran in the built image
    # without the agent's work the tests fail, except the one the image alone satisfies
    assert [idle[i]["reward"] for i in range(3)] == [0.0, 0.0, 1.0]


def test_a_harbor_task_folder_missing_its_tests_is_one_line(tmp_path: Path) -> None:
    task = tmp_path / "broken"
    (task / "environment").mkdir(parents=True)
    (task / "task.toml").write_text("[agent]\ntimeout_sec = 10\n")
    (task / "instruction.md").write_text("Do nothing.\n")
    result = run_prime(["eval", "run", "harbor", "-m", "m", "-b", "http://127.0.0.1:9/v1", "-n", "1",
                        "-a", json.dumps({"path": str(tmp_path)})], tmp_path)
    assert result.returncode == 2 and "a Harbor task needs instruction.md and tests/test.sh" in result.stderr
    assert "Traceback" not in result.stderr
