"""`prime gepa run` on a verifiers v1 taskset (issue 58): the tasks' shared system prompt is the seed, each
candidate replaces every task's own, and the command printed to use the best reads it from its file (a v1
taskset takes `system_prompt` as a file in its config)."""

from __future__ import annotations

import json
import shlex
import subprocess

from tests.envs.test_v1_tasksets import REVERSE, TEXTS, write_env
from tests.evals.cli_support import PRIME, only_run_dir, prime_env, read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

SEED = "Reverse the text in <reversed_text> tags."
BETTER = "Reverse the text character by character, inside <reversed_text> tags."


def reply(body: dict) -> str:
    messages = body["messages"]
    if body["model"] == "reflector":
        return f"A more precise instruction helps.\n```\n{BETTER}\n```"
    system, text = messages[0]["content"], messages[-1]["content"]
    return f"<reversed_text>{text[::-1] if 'character by character' in system else text}</reversed_text>"


def test_gepa_on_a_v1_taskset_starts_from_the_tasks_prompt_and_its_best_runs_as_printed(tmp_path):
    write_env(tmp_path, "rev_v1", REVERSE.format(texts=TEXTS * 5))
    with ScriptedOpenAIServer(reply) as server:
        result = run_prime(["gepa", "run", "rev-v1", "-m", "student", "-M", "reflector", "-b", server.url, "-B", "40",
                            "-n", "8", "-N", "6", "-a", '{"count": 20}', "--plain", "-o", str(tmp_path / "run")], tmp_path)
        assert result.returncode == 0, result.stderr
        candidates = [json.loads(line) for line in (tmp_path / "run" / "candidates.jsonl").read_text().splitlines()]
        assert candidates[0]["system_prompt"] == SEED and candidates[0]["val_mean"] < 1.0
        assert (tmp_path / "run" / "best_prompt.txt").read_text().strip() == BETTER
        use = next(line for line in result.stdout.splitlines() if line.startswith("Use it: "))
        args = shlex.split(use.removeprefix("Use it: "))
        assert args[:4] == ["prime", "eval", "run", "rev-v1"]
        assert json.loads(args[args.index("-a") + 1]) == {"count": 20,
                                                          "system_prompt": str((tmp_path / "run" / "best_prompt.txt").resolve())}
        again = subprocess.run([str(PRIME), *args[1:], "-n", "2", "-r", "1", "-s"], cwd=tmp_path, env=prime_env(),
                               capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    rows = read_rows(only_run_dir(tmp_path / "environments"))
    assert all(r["prompt"][0]["content"].strip() == BETTER and r["reward"] == 1.0 for r in rows)
