"""`Runtime` of verifiers' v1 API: where a task's programs run (a task's `setup`, or a reward that reads files
or runs a script). Tasksets name it in signatures (`async def correct(self, trace, runtime: vf.Runtime)`).
prime's own agent loop runs chat and tool-calling tasks in process and gives them no runtime yet: a reward
or hook that needs one fails its rollout with a message saying so (counted and shown, never scored 0)."""

from __future__ import annotations

from typing import Any


class Runtime:
    """The interface tasksets call; prime provides none to tasks yet (see the module docstring)."""

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("prime gives v1 tasks no runtime yet")


class ProgramResult:
    def __init__(self, exit_code: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr
