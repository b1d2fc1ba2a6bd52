"""`owner/my-env` ids (my-env published on the package index named owner) in every command that takes an
environment: used when installed (or local), else one line with the one command that installs it."""

from __future__ import annotations

from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

INSTALL = "error: no environment 'team/ghost' is installed (module ghost): install it with `prime env install team/ghost`"


def one_error_line(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_eval_of_a_missing_owner_id_gives_the_install_command(tmp_path):
    assert one_error_line(run_prime(["eval", "team/ghost"], tmp_path)) == INSTALL
    with ScriptedOpenAIServer(lambda r: "x") as server:
        result = run_prime(["eval", "run", "team/ghost", "-m", "m", "-b", server.url, "-n", "1"], tmp_path)
    assert INSTALL in one_error_line(result) and "prime env init" not in result.stderr
    assert not server.requests


def test_train_with_a_missing_owner_id_stops_before_any_work(tmp_path):
    config = tmp_path / "rl.toml"
    config.write_text('[orchestrator]\nbatch_size = 16\nrollouts_per_example = 4\n\n'
                      '[[orchestrator.env]]\nid = "team/ghost"\n')
    result = run_prime(["train", str(config), "--output-dir", str(tmp_path / "out")], tmp_path)
    assert one_error_line(result) == INSTALL.replace("error: ", "error: orchestrator.env[0].id: ")
    assert not (tmp_path / "out").exists()


def test_info_and_check_take_the_owner_form(tmp_path):
    assert run_prime(["env", "init", "my-env"], tmp_path).returncode == 0
    info = run_prime(["env", "info", "team/my-env"], tmp_path)
    assert info.returncode == 0 and info.stdout.startswith("team/my-env  ("), info.stderr
    assert "eval defaults: num_examples=5" in info.stdout  # read from ./environments/my_env/pyproject.toml
    check = run_prime(["env", "check", "team/my-env"], tmp_path)
    assert check.returncode == 0 and check.stdout.startswith("team/my-env: 3 eval rows"), check.stderr
    for command in ("info", "check"):
        assert one_error_line(run_prime(["env", command, "team/ghost"], tmp_path)) == INSTALL
        assert "path separator" in one_error_line(run_prime(["env", command, "a/b/c"], tmp_path))


def test_an_id_with_two_slashes_is_refused_in_one_line_not_sent_to_install(tmp_path):
    """`a/b/c` is neither NAME nor OWNER/NAME: no `prime env install a/b/c` is suggested."""
    expected = "'a/b/c' is not an environment id: an id is NAME or OWNER/NAME (e.g. team/my-env)"
    assert one_error_line(run_prime(["eval", "run", "a/b/c", "-m", "x"], tmp_path)) == f"error: {expected}"
    assert one_error_line(run_prime(["eval", "a/b/c"], tmp_path)) == f"error: {expected}"
    config = tmp_path / "rl.toml"
    config.write_text('[orchestrator]\nbatch_size = 16\nrollouts_per_example = 4\n\n'
                      '[[orchestrator.env]]\nid = "a/b/c"\n')
    result = run_prime(["train", str(config), "--dry-run"], tmp_path)
    assert one_error_line(result) == f"error: orchestrator.env[0].id: {expected}"
