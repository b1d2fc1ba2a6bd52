"""Printed commands of runs on the embedded model say `-m local` (its server's URL dies with the run)
and work when pasted. The running `prime serve` is a scripted server here (see record_local_server);
tests/integration runs the real one."""

from __future__ import annotations

from prime_cli.serve.embedded import EMBEDDED_NAME
from tests.cli.conftest import metadata, record_local_server, run_dirs
from tests.support.cli import run_prime, run_shell
from tests.support.scripted_server import ScriptedOpenAIServer


def test_retry_command_of_a_local_run_says_m_local_and_works_pasted(tmp_path):
    env = record_local_server(tmp_path / "cache", server := ScriptedOpenAIServer(
        models=[EMBEDDED_NAME], faults=["500"] * 3).start())
    try:
        first = run_prime(["eval", "run", "reverse-text", "-n", "3", "-r", "2", "-s", "--max-retries", "0", "-c", "1"],
                          tmp_path, env)
        assert first.returncode == 1, first.stderr  # 3 of 6 errored: above the default 10% budget
        [run_dir] = run_dirs(tmp_path)
        assert metadata(run_dir)["status"] == "completed_with_errors"
        [line] = [x for x in first.stdout.splitlines() if x.startswith("Retry errors with: ")]
        command = line.removeprefix("Retry errors with: ")
        assert " -m local " in command and " -b " not in command and server.url not in command
        pasted = run_shell(command, tmp_path / "cache", env)  # from another folder
        assert pasted.returncode == 0, pasted.stderr
    finally:
        server.stop()
    meta = metadata(run_dir)
    assert meta["status"] == "completed" and meta["error_budget"]["errored_rollouts"] == 0
