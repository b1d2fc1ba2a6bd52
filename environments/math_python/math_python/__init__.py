"""math-python: solve math problems with a sandboxed Python interpreter as a tool.

A ToolEnv with one tool, `python(code)`. Each rollout gets its own interpreter (sandbox.py):
variables persist between the rollout's calls and the interpreter is destroyed when the rollout
ends. Code that fails, or hits a limit (CPU, memory, wall clock, output size, files, network,
processes), comes back to the model as a tool error; the host is never at risk. The final answer
goes inside \\boxed{} and is checked with math-verify.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import prime_cli.envs as vf

from .answers import data_folder, last_boxed, math_equal, read_problems
from .sandbox import PythonSandbox, SandboxLimits, SandboxResult

SYSTEM_PROMPT = (
    "Solve the math problem. You can run Python code with the `python` tool (variables persist "
    "between calls; print what you want to see; sympy and the standard library are available). "
    "When you are done, reply without a tool call and put the final answer, a number only, inside "
    "\\boxed{}."
)

__all__ = ["MathPythonEnv", "PythonSandbox", "SandboxLimits", "format_result", "load_environment"]


def format_result(result: SandboxResult, limit: int) -> str:
    """The tool's reply; raises ToolCallError (shown to the model as an error) on any failure."""
    text = result.output
    problems = []
    if result.dropped_bytes:
        problems.append(f"OutputLimitExceeded: only the first {limit} bytes of output are shown "
                        f"({result.dropped_bytes} more bytes were dropped)")
    if result.error:
        problems.append(result.error.rstrip())
    if problems:
        raise vf.ToolCallError("\n".join(filter(None, [text.rstrip(), *problems])))
    return text if text.strip() else "(no output: print() values, or end the code with an expression)"


class MathPythonEnv(vf.StatefulToolEnv):
    def __init__(self, limits: SandboxLimits | None = None, **kwargs: Any) -> None:
        super().__init__(tools=[], **kwargs)
        self.limits = limits or SandboxLimits()
        self.sandboxes: dict[str, PythonSandbox] = {}
        self._sandboxes_lock = threading.Lock()
        self.add_tool(self.python, args_to_skip=["sandbox_id"])

    def python(self, code: str, sandbox_id: str) -> str:
        """Run Python code in this conversation's interpreter and return what it printed.

        Args:
            code: Python source. Variables and imports persist between calls; the value of a final
                expression is printed.
        """
        with self._sandboxes_lock:
            sandbox = self.sandboxes.get(sandbox_id)
            if sandbox is None:
                sandbox = self.sandboxes[sandbox_id] = PythonSandbox(self.limits)
        return format_result(sandbox.run(code), self.limits.max_output_bytes)

    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state["sandbox_id"] = uuid.uuid4().hex
        return state

    def update_tool_args(self, tool_name: str, tool_args: dict[str, Any], messages: vf.Messages,
                         state: vf.State, **kwargs: Any) -> dict[str, Any]:
        return {**tool_args, "sandbox_id": state["sandbox_id"]}

    @vf.cleanup
    async def close_sandbox(self, state: vf.State) -> None:
        with self._sandboxes_lock:
            sandbox = self.sandboxes.pop(state.get("sandbox_id"), None)
        if sandbox is not None:
            await asyncio.to_thread(sandbox.close)


def load_environment(
    data_dir: str | None = None,
    num_train_examples: int = -1,
    num_eval_examples: int = -1,
    system_prompt: str = SYSTEM_PROMPT,
    max_turns: int = 8,
    timeout_seconds: float = 15.0,
    cpu_seconds: int = 10,
    memory_mb: int = 1024,
    max_output_bytes: int = 8192,
) -> vf.Environment:
    """Math with a Python tool.

    Args:
        data_dir: folder of GSM8K-format train.jsonl / test.jsonl (default: $PRIME_DATA_DIR).
        num_train_examples / num_eval_examples: rows kept from each split (-1: all).
        system_prompt: the instruction given to the model (GEPA optimises it).
        max_turns: model calls per rollout.
        timeout_seconds: wall-clock limit of one tool call (the interpreter is then restarted).
        cpu_seconds: CPU limit of one tool call (the interpreter survives).
        memory_mb: address-space limit of the interpreter.
        max_output_bytes: output of one call shown to the model.
    """
    folder = data_folder(data_dir)
    limits = SandboxLimits(wall_seconds=timeout_seconds, cpu_seconds=cpu_seconds, memory_mb=memory_mb,
                           max_output_bytes=max_output_bytes)
    parser = vf.Parser(extract_fn=last_boxed)

    def correct_answer(completion, answer, parser) -> float:
        """1.0 when the final \\boxed{} holds the reference number (math-verify)."""
        return 1.0 if math_equal(answer, parser.parse_answer(completion)) else 0.0

    def tool_calls(completion) -> float:
        """Number of python calls made (a metric, weight 0)."""
        return float(sum(len(m.get("tool_calls") or []) for m in vf.messages.assistant_messages(completion)))

    def tool_errors(state) -> float:
        """Number of python calls that ended in an error (a metric, weight 0)."""
        return float(len(state.get("tool_errors") or []))

    rubric = vf.Rubric(funcs=[correct_answer], parser=parser)
    rubric.add_metric(tool_calls)
    rubric.add_metric(tool_errors)
    return MathPythonEnv(
        limits=limits,
        dataset=lambda: read_problems(folder, "train", num_train_examples),
        eval_dataset=lambda: read_problems(folder, "test", num_eval_examples),
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
