"""Config values that failed validation, one problem per key, so that each reads as the user wrote it:
a command-line flag by its name (`-n/--num-examples must be ... (got -3)`, named by the CLI, which knows
its flags), a file's key with the file (`x.toml [[eval]] #1: num_examples must be ... (got -3)`).

Eval and GEPA configs are pydantic models; pydantic's own wording ("Value error, ...", "Input should
be ...") never reaches the user."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prime_cli.envs.errors import UserInputError


@dataclass(frozen=True)
class ValueProblem:
    key: str  # the config key (dotted below the top level)
    message: str  # what the value must be: "must be at least 1"
    value: Any  # the value given

    def text(self, name: str) -> str:
        return f"{name} {self.message} (got {shown(self.value)})"


class ConfigValueError(UserInputError):
    """Values of a config that are not allowed (`problems`), plus other problems as ready lines (`others`:
    unknown or missing keys). The message names each key in `where`; `describe(names)` names the keys
    the user gave otherwise (by their flags)."""

    def __init__(self, where: str, problems: list[ValueProblem], others: list[str] = ()) -> None:
        self.where, self.problems, self.others = where, list(problems), list(others)
        super().__init__(self.describe())

    def describe(self, names: Mapping[str, str] | None = None) -> str:
        """One line: a problem of a key in `names` says that name (e.g. the flag that gave the value)."""
        names = names or {}
        parts = [p.text(names[p.key]) if p.key in names else f"{self.where}: {p.text(p.key)}" for p in self.problems]
        return "; ".join(parts + self.others)


def shown(value: Any) -> str:
    """A value as the user would write it (JSON/TOML-like), cut to 60 characters."""
    try:
        text = json.dumps(value, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def closest_key(name: str, keys: Iterable[str]) -> str | None:
    """The key `name` was most likely meant to be (a typo), or None when none is close."""
    close = difflib.get_close_matches(name, list(keys), n=1)
    return close[0] if close else None


_BOUND_WORDS = {"greater than or equal to": "at least", "less than or equal to": "at most", "greater than": "more than"}


def problem_message(error: Mapping[str, Any]) -> str:
    """pydantic's message of one error, as "must be ...": without "Value error, " or "Input should be"."""
    message = str(error.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, ", "Assertion error, "):
        message = message.removeprefix(prefix)
    if message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
        if message.startswith("must be a valid "):  # "..., unable to parse string as an integer"
            message = message.split(", ", 1)[0]
        for bound, words in _BOUND_WORDS.items():  # as the CLI words a flag's range: "must be at least 1"
            message = message.replace(f"must be {bound} ", f"must be {words} ", 1)
    return message


def value_problem(error: Mapping[str, Any]) -> ValueProblem:
    key = ".".join(str(part) for part in error.get("loc", ())) or "(entry)"
    return ValueProblem(key, problem_message(error), error.get("input"))
