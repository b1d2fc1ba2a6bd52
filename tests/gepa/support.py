"""A toy environment and scripted student/reflection models for GEPA engine tests.

Each row is of one kind (alpha, beta, ...). The student answers a row correctly only when the
system prompt contains the instruction `kind <name>`; otherwise it answers "unknown". The
reflection model reads the kinds in the examples it is shown and adds the missing instructions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prime_cli.envs.errors import ModelError
from prime_cli.envs.types import ChatResponse
from tests.support.scripted_client import ScriptedClient

KINDS = ["alpha", "beta", "gamma", "delta", "eps"]
TOY_ENV = f'''
import prime_cli.envs as vf

KINDS = {KINDS!r}


def load_environment(system_prompt: str = "Answer the question.", group: bool = False, other_prompt: str = "Answer the question."):
    def rows(n, offset):
        return [{{"question": f"kind:{{KINDS[(i * 7 + offset) % len(KINDS)]}} item {{i}}",
                  "answer": KINDS[(i * 7 + offset) % len(KINDS)]}} for i in range(n)]

    def exact(completion, answer) -> float:
        return 1.0 if completion and completion[-1]["content"].strip() == answer else 0.0

    def length(completion) -> float:
        return float(len(completion[-1]["content"])) if completion else 0.0

    def make(prompt):
        rubric = vf.Rubric(funcs=[exact])
        rubric.add_metric(length)
        return vf.SingleTurnEnv(dataset=rows(40, 0), eval_dataset=rows(40, 3), system_prompt=prompt, rubric=rubric)

    if group:
        return vf.EnvGroup([make(system_prompt), make(other_prompt)], env_names=["a", "b"])
    return make(system_prompt or None)
'''


def toy_config(run_dir: Path, **overrides: Any) -> Any:
    """An engine config for the toy environment (build_config, as `prime gepa run` makes it)."""
    from prime_cli.gepa.config import build_config

    values = {"env_id": "toy-gepa", "model": "student", "reflection_model": "reflector", "max_calls": 200,
              "num_train": 20, "num_val": 10, "minibatch_size": 3, "run_dir": str(run_dir), "display": "plain"}
    return build_config("test", **{**values, **overrides})


def lines(path: Path) -> list[Any]:
    """The JSON lines of a run file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_toy_env(root: Path) -> None:
    folder = root / "environments" / "toy_gepa"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy_gepa.py").write_text(TOY_ENV)


def system_text(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else ""


def student_reply(messages, tools, sampling_args) -> str:
    kind = re.search(r"kind:(\w+)", messages[-1]["content"]).group(1)
    return kind if f"kind {kind}" in system_text(messages) else "unknown"


def current_prompt(text: str) -> str:
    match = re.search(r"```\n(.*?)\n```", text, re.S)
    prompt = match.group(1) if match else ""
    return "" if prompt == "(empty)" else prompt


def reflector_reply(messages, tools, sampling_args) -> str:
    text = messages[-1]["content"]
    prompt = current_prompt(text)
    examples = text.split("## Example", 1)[1] if "## Example" in text else ""
    missing = [k for k in dict.fromkeys(re.findall(r"kind:(\w+)", examples)) if f"kind {k}" not in prompt]
    new = "\n".join([prompt] + [f"Answer kind {k} with its kind name." for k in missing]).strip()
    return f"Analysis done.\n```\n{new}\n```"


class Pool:
    """What the engine needs from a client pool: `for_group(i) -> (client, model)`."""

    def __init__(self, client: Any, model: str) -> None:
        self.client, self.model = client, model

    def for_group(self, index: int) -> tuple[Any, str]:
        return self.client, self.model


def student() -> Pool:
    return Pool(ScriptedClient(student_reply), "student")


def reflector(script=reflector_reply) -> Pool:
    return Pool(ScriptedClient(script), "reflector")


def truncating_reflector(messages, tools, sampling_args) -> ChatResponse:
    text = reflector_reply(messages, tools, sampling_args)
    return ChatResponse(message={"role": "assistant", "content": text[: len(text) - 8]}, finish_reason="length")


def failing_reflector(messages, tools, sampling_args) -> Exception:
    return ModelError("reflector at http://x failed after 4 attempts; last error: HTTP 500")
