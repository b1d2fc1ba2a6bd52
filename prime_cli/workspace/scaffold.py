"""`prime env init NAME`: a new environment package in ./environments/<module>/ (`--v1`: a verifiers v1
taskset package instead of a `load_environment()` module)."""

from __future__ import annotations

from pathlib import Path

from .errors import WorkspaceError
from .names import check_env_name, dist_name, module_name

PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{name}: a prime environment."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["prime-cli"]

[tool.setuptools]
py-modules = ["{module}"]

# Defaults for `prime eval run {name}` (flags override them).
[tool.prime.eval]
num_examples = 5
rollouts_per_example = 3
max_tokens = 256              # tokens per model reply: a cap keeps a rambling model from running to its context
'''

README = '''# {name}

A prime environment. Edit `{module}.py`: the dataset, the system prompt, the parser and the rewards.

```
prime env install {name}              # editable install into the current Python environment
prime env info {name}                 # arguments, dataset sizes, reward functions
prime eval run {name} -m MODEL -n 5 -r 3
```
'''

MODULE = '''"""{name}: a single-turn environment. Replace the dataset and the reward with your task."""

from __future__ import annotations

import prime_cli.envs as vf

SYSTEM_PROMPT = "Answer the question. Put only the final answer inside <answer></answer> tags."


def load_environment(system_prompt: str = SYSTEM_PROMPT, format_weight: float = 0.2) -> vf.Environment:
    """{name} environment.

    Args:
        system_prompt: the instruction given to the model (GEPA optimises it).
        format_weight: weight of the <answer> format reward.
    """
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def correct_answer(completion, answer, parser) -> float:
        """1.0 when the <answer> equals the reference answer."""
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    rubric = vf.Rubric(
        funcs=[correct_answer, parser.get_format_reward_func()], weights=[1.0, format_weight], parser=parser
    )
    dataset = [
        {{"question": "What is 2 + 3?", "answer": "5"}},
        {{"question": "What is the capital of France?", "answer": "Paris"}},
        {{"question": "How many legs does a spider have?", "answer": "8"}},
    ]
    return vf.SingleTurnEnv(dataset=dataset, system_prompt=system_prompt, parser=parser, rubric=rubric)
'''


V1_PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{name}: a verifiers v1 taskset."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["verifiers>=0.4.0"]  # inside prime, prime itself provides `verifiers`

[tool.setuptools]
packages = ["{module}"]

# Defaults for `prime eval run {name}` (flags override them).
[tool.prime.eval]
num_examples = 5
rollouts_per_example = 3
max_tokens = 256
'''

V1_README = '''# {name}

A verifiers v1 taskset. Edit `{module}/taskset.py`: the rows `load()` returns, the task's rewards and stop
conditions; `{cls}Config`'s fields are the environment arguments (`-a '{{"count": 2}}'`).

```
prime env install {name}              # editable install into the current Python environment
prime env info {name}                 # arguments, rows, reward functions
prime eval run {name} -m MODEL -n 5 -r 3
```
'''

V1_INIT = '''from {module}.taskset import {cls}Taskset

__all__ = ["{cls}Taskset"]
'''

V1_TASKSET = '''"""{name}: a single-turn verifiers v1 taskset. Replace the rows and the reward with your task."""

from __future__ import annotations

import re

import verifiers.v1 as vf

SYSTEM_PROMPT = "Answer the question. Put only the final answer inside <answer></answer> tags."
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
ROWS = [
    ("What is 2 + 3?", "5"),
    ("What is the capital of France?", "Paris"),
    ("How many legs does a spider have?", "8"),
]


class {cls}Data(vf.TaskData):
    answer: str
    """The reference answer."""


class {cls}Task(vf.Task[{cls}Data]):
    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct_answer(self, trace: vf.Trace) -> float:
        match = ANSWER.search(trace.last_reply)
        return 1.0 if match and match.group(1).strip() == self.data.answer else 0.0

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class {cls}Config(vf.TasksetConfig):
    count: int = len(ROWS)
    """How many rows to load."""


class {cls}Taskset(vf.Taskset[{cls}Task, {cls}Config]):
    def load(self) -> list[{cls}Task]:
        return [{cls}Task({cls}Data(prompt=question, system_prompt=SYSTEM_PROMPT, answer=answer), self.config.task)
                for question, answer in ROWS[: self.config.count]]
'''


def class_prefix(module: str) -> str:
    return "".join(part.capitalize() for part in module.split("_") if part) or "My"


def init_environment(name: str, root: Path | None = None, force: bool = False, v1: bool = False) -> list[Path]:
    """Write pyproject.toml, README.md and <module>.py (`v1`: a <module>/ package with a taskset) under
    <root>/environments/<module>/."""
    name = check_env_name(name)
    module = module_name(name)
    folder = (root or Path.cwd()) / "environments" / module
    if v1:
        cls = class_prefix(module)
        files = {
            folder / "pyproject.toml": V1_PYPROJECT.format(name=name, dist=dist_name(name), module=module),
            folder / "README.md": V1_README.format(name=name, module=module, cls=cls),
            folder / module / "__init__.py": V1_INIT.format(module=module, cls=cls),
            folder / module / "taskset.py": V1_TASKSET.format(name=name, cls=cls),
        }
    else:
        files = {
            folder / "pyproject.toml": PYPROJECT.format(name=name, dist=dist_name(name), module=module),
            folder / "README.md": README.format(name=name, module=module),
            folder / f"{module}.py": MODULE.format(name=name),
        }
    existing = [p for p in files if p.exists()]
    if existing and not force:
        raise WorkspaceError(f"{folder} already holds {', '.join(p.name for p in existing)}; "
                             "pick another name or pass --force to overwrite")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
