"""A student rollout that ends with any `vf.FatalError` (not only an endpoint error) stops the GEPA search:
the run fails with that error's message. The evaluator reads the record's `fatal` flag, not the class name."""

from __future__ import annotations

import asyncio
import io

import pytest

import prime_cli.envs as vf
from prime_cli.gepa.api import run_search
from prime_cli.runs.status import RunStatus
from tests.gepa import support

pytestmark = pytest.mark.filterwarnings("ignore::prime_cli.envs.loader.LocalEnvironmentWarning")


class ServiceGone(vf.FatalError):
    pass


def test_a_fatal_error_of_any_type_stops_the_search(tmp_path, monkeypatch):
    support.write_toy_env(tmp_path)
    monkeypatch.chdir(tmp_path)

    def student(messages, tools, sampling_args):
        return ServiceGone("the student service is gone")

    cfg = support.toy_config(tmp_path / "run", max_calls=60)
    outcome, _ = asyncio.run(run_search(cfg, False, io.StringIO(),
                                        pools=(support.Pool(support.ScriptedClient(student), "student"),
                                               support.reflector())))
    assert outcome.status == RunStatus.FAILED and outcome.error == "the student service is gone"
