"""math-python: solve math problems with a Python tool that runs in a sandbox.

A `vf.PythonEnv`: one tool, `python(code)`, backed by a persistent Python REPL inside the rollout's
own sandbox (bubblewrap by default; podman or docker with `--sandbox`). Variables persist between the
rollout's calls and the sandbox is removed when the rollout ends. Code that fails, or hits a limit
(CPU or wall clock per call, memory, output size), comes back to the model as a tool error. The
boundary is the sandbox's (kernel namespaces and cgroups, or the container engine), not Python:
see README.md for what each provider enforces. The final answer goes inside \\boxed{} and is
checked with math-verify.
"""

from __future__ import annotations

from typing import Any

import prime_cli.envs as vf

from .answers import data_folder, last_boxed, math_equal, read_problems

SYSTEM_PROMPT = (
    "Solve the math problem. You can run Python code with the `python` tool (variables persist "
    "between calls; print what you want to see; sympy and the standard library are available). "
    "When you are done, reply without a tool call and put the final answer, a number only, inside "
    "\\boxed{}."
)
PACKAGES = "sympy numpy"  # the tool's code may import them: checked when each sandbox's REPL starts

__all__ = ["MathPythonEnv", "load_environment"]


class MathPythonEnv(vf.PythonEnv):
    """The math-python environment: PythonEnv with its packages and the friendly refusal of processes."""


def load_environment(
    data_dir: str | None = None,
    num_train_examples: int = -1,
    num_eval_examples: int = -1,
    system_prompt: str = SYSTEM_PROMPT,
    max_turns: int = 8,
    timeout_seconds: float = 15.0,
    cpu_seconds: float = 10,
    memory_mb: int = 1024,
    max_output_bytes: int = 8192,
    sandbox: str | None = None,
    image: str | None = None,
) -> vf.Environment:
    """Math with a Python tool.

    Args:
        data_dir: folder of GSM8K-format train.jsonl / test.jsonl (default: $PRIME_DATA_DIR).
        num_train_examples / num_eval_examples: rows kept from each split (-1: all).
        system_prompt: the instruction given to the model (GEPA optimises it).
        max_turns: model calls per rollout.
        timeout_seconds: wall-clock limit of one tool call (the interpreter is then restarted).
        cpu_seconds: CPU limit of one tool call (the interpreter survives).
        memory_mb: address-space limit of the interpreter (the sandbox's cgroup allows 256 MiB more
            for its helpers).
        max_output_bytes: output of one call shown to the model.
        sandbox: the provider this environment asks for (bwrap, podman, docker; the user's
            --sandbox or PRIME_SANDBOX wins). Default: bwrap.
        image: a container image (podman/docker) or an unpacked root filesystem (bwrap) with
            python3, sympy and numpy. Default: the host's Python under bwrap, prime's base image
            under podman/docker.
    """
    folder = data_folder(data_dir)
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
    options: dict[str, Any] = {"docker_image": image} if image else {}
    return MathPythonEnv(
        sandbox_name="math-python",
        sandbox_provider=sandbox,
        pip_install_packages=PACKAGES,
        timeout_per_command_seconds=timeout_seconds,
        cpu_seconds_per_call=cpu_seconds,
        python_memory_mb=memory_mb,
        memory_gb=(memory_mb + 256) / 1024,
        max_output_bytes=max_output_bytes,
        refuse_processes=True,
        dataset=lambda: read_problems(folder, "train", num_train_examples),
        eval_dataset=lambda: read_problems(folder, "test", num_eval_examples),
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        **options,
    )
