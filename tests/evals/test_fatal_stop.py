"""A rollout that ends with a `vf.FatalError` of the environment's own (not an endpoint error) stops the eval
the way an endpoint error does: the run fails (exit code 2) with that one error line, keeps no row for it, and can be
resumed. The runner reads the record's `fatal` flag, not the class name."""

from __future__ import annotations

import json
from pathlib import Path

from tests.evals.cli_support import only_run_dir
from tests.support.cli import main_in_process
from tests.support.scripted_server import ScriptedOpenAIServer

GONE_ENV = '''
import prime_cli.envs as vf


class SandboxGone(vf.FatalError):
    pass


class Gone(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        raise SandboxGone("the sandbox service is gone")


def said(completion, answer) -> float:
    return 1.0


def load_environment():
    rows = [{"question": f"say {i}", "answer": str(i)} for i in range(6)]
    return Gone(dataset=rows, eval_dataset=rows, max_turns=3, rubric=vf.Rubric(funcs=[said]))
'''


def write_env(root: Path) -> None:
    folder = root / "environments" / "toy_gone"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy_gone.py").write_text(GONE_ENV)


def test_an_environments_fatal_error_stops_the_eval(tmp_path, monkeypatch, capsys):
    write_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    with ScriptedOpenAIServer() as server:
        code, out, err = main_in_process(["eval", "run", "toy-gone", "-m", "m", "-b", server.url, "-n", "6", "-r", "2",
                                          "-c", "2", "-s"], capsys)
    run_dir = only_run_dir(tmp_path)
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert code == 2 and meta["status"] == "failed", (code, meta["status"], err[-2000:])
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "the sandbox service is gone" in errors[0], err[-2000:]
    assert not (run_dir / "results.jsonl").exists() or not (run_dir / "results.jsonl").read_text().strip()
    assert "-R " in out + err
