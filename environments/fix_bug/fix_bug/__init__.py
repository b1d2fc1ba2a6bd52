"""fix-bug: a SandboxEnv example. Each row is a small Python repository with one bug, copied into the
rollout's sandbox by `setup_sandbox`; the model reads and fixes it with the `bash` tool. After the
agent finishes, `post_rollout` (run in the sandbox, before it is closed and before scoring) applies
the commands of a final `<fix>...</fix>` block if the last reply has one (they must succeed), then
runs the row's hidden checks, each in a fresh interpreter; the reward is 1.0 when all of them print
what they must (the fraction passing is a metric).
The checks' expected values never enter the sandbox.
"""

from __future__ import annotations

import re
from typing import Any

import prime_cli.envs as vf

from .repos import REPOS

REPO_DIR = "repo"  # inside the sandbox's work folder
SYSTEM_PROMPT = (
    "You are fixing a bug in a small Python repository. It is in the folder `repo/` of your sandbox "
    "(the `bash` tool runs shell commands there; python3 is available, the network is not). Read the "
    "code, fix the bug in place, and run the repository's test file to check. When you are done, reply "
    "without a tool call; you may end that reply with <fix>shell commands</fix> that are run in "
    "`repo/` before the checks (they must succeed)."
)
FIX = re.compile(r"<fix>(.*?)</fix>", re.DOTALL)


def last_fix(text: str) -> str | None:
    found = FIX.findall(text or "")
    return found[-1].strip() if found else None


def rows() -> list[dict[str, Any]]:
    return [{"question": f"Repository `{REPO_DIR}/` ({repo['name']}): {repo['task']} Find the bug and fix it.",
             "answer": repo["fix"], "info": {"repo": repo["name"]}, "task": "fix-bug"} for repo in REPOS]


class FixBugEnv(vf.SandboxEnv):
    repos = {repo["name"]: repo for repo in REPOS}

    async def setup_sandbox(self, sandbox, state) -> None:
        for path, content in self.repos[state["info"]["repo"]]["files"].items():
            await sandbox.write_file(f"{REPO_DIR}/{path}", content)

    async def post_rollout(self, sandbox, state) -> None:
        repo = self.repos[state["info"]["repo"]]
        completion = state["completion"]
        final = completion[-1].get("content") if completion and completion[-1].get("role") == "assistant" else None
        fix = last_fix(final or "")
        if fix:
            applied = await self.run_in_sandbox(sandbox, fix, cwd=REPO_DIR, timeout=self.timeout_per_command_seconds)
            state["fix_exit_code"] = applied.exit_code
            if not applied.ok:  # a fix whose commands fail is no fix: nothing is checked
                state["checks_passed"] = [False] * len(repo["checks"])
                return
            await sandbox.stop_processes()  # nothing the fix left running may touch the checks
        python = self.python_in(sandbox)
        passed = []
        for expression, expected in repo["checks"]:
            code = f"import sys; sys.path.append('.'); from {repo['module']} import *; print(repr({expression}))"
            result = await self.run_in_sandbox(sandbox, [python, "-I", "-c", code], cwd=REPO_DIR, timeout=10)
            lines = result.stdout.strip().splitlines()
            passed.append(result.exit_code == 0 and bool(lines) and lines[-1] == expected)
        state["checks_passed"] = passed

    @staticmethod
    def python_in(sandbox) -> str:
        import sys

        return sys.executable if sandbox.provider in ("bwrap", "none") and not sandbox.spec.image else "python3"


def load_environment(max_turns: int = 10, sandbox: str | None = None, image: str | None = None,
                     timeout_per_command_seconds: float = 20, system_prompt: str = SYSTEM_PROMPT) -> vf.Environment:
    """Fix a bug in a small repository with a bash tool.

    Args:
        max_turns: model calls per rollout.
        sandbox: the provider this environment asks for (bwrap, podman, docker; --sandbox wins).
        image: a container image (or an unpacked root filesystem for bwrap) with python3.
        timeout_per_command_seconds: one bash command's wall-clock limit.
        system_prompt: the instruction given to the model.
    """
    parser = vf.Parser(extract_fn=last_fix)

    def all_checks_pass(state) -> float:
        """1.0 when every hidden check of the row prints what it must (run by post_rollout), else 0.0."""
        passed = state.get("checks_passed") or []
        return 1.0 if passed and all(passed) else 0.0

    def checks_passed(state) -> float:
        """The fraction of the hidden checks that pass (a metric, weight 0: some pass on the buggy code)."""
        passed = state.get("checks_passed") or []
        return sum(passed) / len(passed) if passed else 0.0

    def bash_calls(completion) -> float:
        """Number of bash calls made (a metric, weight 0)."""
        return float(sum(len(m.get("tool_calls") or []) for m in vf.messages.assistant_messages(completion)))

    rubric = vf.Rubric(funcs=[all_checks_pass], parser=parser)
    rubric.add_metric(checks_passed)
    rubric.add_metric(bash_calls)
    return FixBugEnv(
        sandbox_name="fix-bug", sandbox_provider=sandbox, docker_image=image,
        timeout_per_command_seconds=timeout_per_command_seconds, memory_gb=0.5, disk_size_gb=0.25,
        eval_dataset=rows, system_prompt=system_prompt, parser=parser, rubric=rubric, max_turns=max_turns,
    )


__all__ = ["FixBugEnv", "last_fix", "load_environment"]
