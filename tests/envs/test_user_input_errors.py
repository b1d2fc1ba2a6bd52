"""`vf.UserInputError` is the one base of the mistakes in what the user gave (the CLI prints them as one line,
exit code 2); `EnvConfigError` is its subclass for mistakes in an environment definition only."""

from __future__ import annotations

import pytest

import prime_cli.envs as vf
from prime_cli.clients.errors import ClientConfigError
from prime_cli.evals.export import ExportError
from prime_cli.evals.rescore import RescoreRefused
from prime_cli.evals.sweep import SweepError
from prime_cli.results.compare import CompareError
from prime_cli.runs.config_errors import ConfigValueError
from prime_cli.runs.metadata import RunDirError
from prime_cli.train.errors import TrainConfigError
from prime_cli.workspace.errors import WorkspaceError
from tests.support.cli import run_prime

NOT_ENVIRONMENT_MISTAKES = [ClientConfigError, ConfigValueError, RunDirError, WorkspaceError, CompareError,
                            ExportError, SweepError, RescoreRefused, TrainConfigError]


def test_env_config_error_is_one_kind_of_user_input_error():
    assert vf.UserInputError is vf.errors.UserInputError and "UserInputError" in vf.__all__
    assert issubclass(vf.EnvConfigError, vf.UserInputError) and issubclass(vf.UserInputError, ValueError)
    for error in (vf.DatasetError, vf.RubricError, vf.EnvironmentLoadError):
        assert issubclass(error, vf.EnvConfigError)


@pytest.mark.parametrize("error", NOT_ENVIRONMENT_MISTAKES, ids=lambda error: error.__name__)
def test_the_other_user_input_errors_are_not_called_environment_mistakes(error):
    assert issubclass(error, vf.UserInputError) and not issubclass(error, vf.EnvConfigError)


def test_a_user_input_error_that_is_not_about_an_environment_still_exits_2(tmp_path):
    done = run_prime(["eval", "run", "reverse-text", "-R", str(tmp_path / "nowhere")], tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
