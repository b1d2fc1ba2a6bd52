"""The rows GEPA works on, and how a candidate system prompt is put into them.

The environment builds each row's prompt with its own system prompt (the seed). We take that
system message out again once, keeping the rest of the row, and put a candidate's text in its
place for every rollout. The environment object is never mutated, so rollouts of different
candidates can run at the same time.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import prime_cli.envs as vf
from prime_cli.envs.errors import EnvConfigError

logger = logging.getLogger("prime_cli.gepa")


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def seed_prompt(env: vf.Environment) -> str:
    """The environment's system prompt. An EnvGroup is supported when its children share one."""
    if isinstance(env, vf.EnvGroup):
        prompts = {child.system_prompt or "" for child in env.envs}
        if len(prompts) > 1:
            names = ", ".join(env.env_names)
            raise EnvConfigError(
                f"the EnvGroup's environments ({names}) have different system prompts and GEPA optimises one; "
                "run prime gepa on each environment separately, or give them the same system_prompt")
        return prompts.pop() if prompts else ""
    return env.system_prompt or ""


def strip_system(prompt: Any, seed: str, message_type: str) -> Any:
    """The row's prompt without the seed system prompt the environment put in."""
    if message_type == "completion":
        prefix = seed + "\n\n"
        return prompt[len(prefix):] if seed and isinstance(prompt, str) and prompt.startswith(prefix) else prompt
    messages = list(prompt)
    if seed and messages and messages[0].get("role") == "system" and messages[0].get("content") == seed:
        messages = messages[1:]
    return messages


def with_system(prompt: Any, text: str, message_type: str) -> Any:
    """A prompt with `text` as its system prompt, by the environment's rule: a row that brings its
    own system message keeps it."""
    if message_type == "completion":
        return (text + "\n\n" + prompt) if text else prompt
    messages = copy.deepcopy(list(prompt))
    if text and not (messages and messages[0].get("role") == "system"):
        messages.insert(0, {"role": "system", "content": text})
    return messages


@dataclass
class Splits:
    train: list[dict[str, Any]]
    val: list[dict[str, Any]]
    test: list[dict[str, Any]]


def _base(rows: list[dict[str, Any]], seed: str, message_type: str) -> list[dict[str, Any]]:
    return [{**row, "prompt": strip_system(row["prompt"], seed, message_type)} for row in rows]


def make_splits(env: vf.Environment, seed_text: str, num_train: int, num_val: int, num_test: int,
                seed: int) -> Splits:
    """Train rows from the dataset; validation then test rows from the eval dataset. Without an
    eval dataset, all three come from the dataset, disjoint."""
    has_eval = env.eval_dataset is not None
    has_train = env.dataset is not None
    if has_eval and has_train:
        train = env.get_dataset(n=num_train, seed=seed)
        evaluation = env.get_eval_dataset(n=num_val + num_test, seed=seed)
        val, test = evaluation[:num_val], evaluation[num_val:]
        where = "eval dataset"
    else:
        rows = env.get_eval_dataset(n=-1, seed=seed) if has_eval else env.get_dataset(n=-1, seed=seed)
        val, test = rows[:num_val], rows[num_val:num_val + num_test]
        train = rows[num_val + num_test:num_val + num_test + num_train]
        where = "dataset (the environment has a single split)"
    if len(val) < num_val or len(test) < num_test:
        raise EnvConfigError(
            f"the {where} has {len(val) + len(test)} rows for validation and test, but -N/--num-val {num_val} "
            f"and --num-test {num_test} need {num_val + num_test}; lower them")
    if not train:
        raise EnvConfigError(f"no training rows left for -n/--num-train {num_train} (the {where} is too small)")
    message_type = env.message_type
    return Splits(_base(train, seed_text, message_type), _base(val, seed_text, message_type),
                  _base(test, seed_text, message_type))
