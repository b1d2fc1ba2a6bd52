"""`vf.FatalError`: a rollout failure that will hit every other rollout too. The rollout records it with
`"fatal": true`, so engines stop on the record's flag instead of matching class names."""

from __future__ import annotations

import prime_cli.envs as vf
from prime_cli.clients.errors import FatalEndpointError
from prime_cli.envs.errors import error_record, is_fatal
from tests.support.scripted_client import ScriptedClient


class SandboxGone(vf.FatalError):
    pass


def test_fatal_error_is_public_and_endpoint_errors_subclass_it():
    assert vf.FatalError is vf.errors.FatalError and "FatalError" in vf.__all__
    assert issubclass(vf.FatalError, vf.Error)
    assert issubclass(FatalEndpointError, vf.FatalError) and issubclass(FatalEndpointError, vf.ModelError)


def test_the_error_record_says_fatal_only_for_fatal_errors():
    assert error_record(SandboxGone("the sandbox died")) == {"type": "SandboxGone", "message": "the sandbox died",
                                                             "fatal": True}
    assert error_record(FatalEndpointError("HTTP 401"))["fatal"] is True
    assert error_record(vf.ModelError("HTTP 500")) == {"type": "ModelError", "message": "HTTP 500"}


def test_is_fatal_reads_the_flag_and_old_records_of_endpoint_errors():
    assert is_fatal({"type": "SandboxGone", "message": "x", "fatal": True})
    assert is_fatal({"type": "FatalEndpointError", "message": "connection refused"})  # written before the flag
    assert not is_fatal({"type": "ModelError", "message": "HTTP 500"})
    assert not is_fatal(None) and not is_fatal({})


async def test_a_rollout_that_raises_a_fatal_error_records_the_flag():
    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=vf.Rubric(funcs=[]))
    state = await env.rollout(ScriptedClient([SandboxGone("the sandbox died")]), "m", env.get_dataset()[0])
    assert state["error"] == {"type": "SandboxGone", "message": "the sandbox died", "fatal": True}
