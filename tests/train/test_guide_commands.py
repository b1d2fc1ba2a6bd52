"""The training guides' own command lines, as prime reads them: the hosted `prime train submit CONFIG`
(verifiers guide) is one line saying prime has none and what runs the config here; prime-rl's
`rl @ config.toml` spelling is `prime train @ CONFIG`."""

from __future__ import annotations

from tests.evals.cli_support import REPO
from tests.train.support import MINIMAL, assert_one_error_line, run_train, write

CPU = "configs/rl/reverse-text-cpu.toml"


def test_submit_says_there_is_no_hosted_service_and_what_runs_it_here():
    result = run_train(["submit", "configs/rl/reverse-text.toml"])
    line = assert_one_error_line(result, "no hosted", "prime train configs/rl/reverse-text.toml")
    assert "unexpected extra argument" not in line


def test_submit_alone_says_the_same():
    assert_one_error_line(run_train(["submit"]), "no hosted", "prime train CONFIG")


def test_at_config_is_the_config(tmp_path):
    spelled = run_train(["@", CPU, "--dry-run", "-o", str(tmp_path / "run")])
    plain = run_train([CPU, "--dry-run", "-o", str(tmp_path / "run")])
    assert spelled.returncode == 0, spelled.stderr
    assert spelled.stdout == plain.stdout and "nothing was started" in spelled.stdout


def test_a_file_named_submit_is_a_config(tmp_path):
    write(tmp_path, MINIMAL, "submit")
    result = run_train(["submit", "--dry-run", "-o", str(tmp_path / "run")], cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_two_configs_are_one_line(tmp_path):
    result = run_train([CPU, "configs/rl/reverse-text.toml", "--dry-run"])
    assert_one_error_line(result, "one config", "--set")
    result = run_train(["@", CPU, "@", "configs/rl/reverse-text.toml", "--dry-run"])
    assert_one_error_line(result, "one config")
    assert_one_error_line(run_train(["@"]), "@ CONFIG")


def test_usage_still_names_one_config():
    help_text = run_train(["--help"]).stdout
    assert "Usage: prime train [OPTIONS] [CONFIG]\n" in help_text
    assert (REPO / CPU).is_file()
