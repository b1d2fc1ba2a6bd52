"""Dataset normalisation: whatever the user hands in becomes a list of checked row dicts.

Accepted: a list of dicts, a pandas DataFrame, a `datasets.Dataset` (duck-typed; `datasets` is not
a dependency), or a zero-argument callable returning one of those (built on first use).
Every normalised row has `prompt`, `answer`, `info` (a dict), `task` and `example_id`; other
columns are kept as they are.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterable
from typing import Any

from .errors import DatasetError
from .types import Message

DatasetLike = Any


def materialize(dataset: DatasetLike, name: str) -> list[dict[str, Any]]:
    """Turn any accepted dataset form into a list of row dicts (no validation yet)."""
    if callable(dataset) and not _is_tabular(dataset):
        dataset = dataset()
    if isinstance(dataset, list):
        return dataset
    if hasattr(dataset, "to_dict") and hasattr(dataset, "columns"):  # pandas.DataFrame
        return dataset.to_dict(orient="records")
    if hasattr(dataset, "column_names") and hasattr(dataset, "to_list"):  # datasets.Dataset
        return dataset.to_list()
    if isinstance(dataset, Iterable) and not isinstance(dataset, (str, bytes, dict)):
        return list(dataset)
    raise DatasetError(
        f"{name} must be a list of dicts, a pandas DataFrame, a datasets.Dataset or a "
        f"zero-argument function returning one; got {type(dataset).__name__}"
    )


def _is_tabular(obj: Any) -> bool:
    return hasattr(obj, "columns") or hasattr(obj, "column_names")


def _parse_info(value: Any, where: str) -> dict[str, Any]:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN from pandas
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            snippet = value if len(value) <= 60 else value[:57] + "..."
            raise DatasetError(f"{where}: `info` is not valid JSON ({exc.msg} at char {exc.pos}): {snippet!r}") from None
        if not isinstance(parsed, dict):
            raise DatasetError(f"{where}: `info` must be a JSON object, got {type(parsed).__name__}")
        return parsed
    raise DatasetError(f"{where}: `info` must be a dict or a JSON string, got {type(value).__name__}")


def _check_messages(prompt: Any, where: str) -> list[Message]:
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise DatasetError(f"{where}: `prompt` must be a non-empty list of messages, got {type(prompt).__name__}")
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or "role" not in message:
            raise DatasetError(f"{where}: prompt message {i} must be a dict with a `role` and `content`")
    return [dict(m) for m in prompt]


def build_prompt(
    row: dict[str, Any],
    where: str,
    system_prompt: str | None,
    few_shot: list[Message] | None,
    message_type: str,
) -> Any:
    """The prompt of a row: its `prompt` as given, or one built from its `question`."""
    has_prompt = row.get("prompt") is not None
    if not has_prompt and row.get("question") is None:
        columns = ", ".join(sorted(row)) or "none"
        raise DatasetError(f"{where} has neither `prompt` nor `question` (its columns: {columns})")
    if message_type == "completion":
        text = row["prompt"] if has_prompt else row["question"]
        if not isinstance(text, str):
            raise DatasetError(f"{where}: message_type='completion' needs a string prompt or question")
        return (system_prompt + "\n\n" + text) if system_prompt else text
    if has_prompt:
        prompt = _check_messages(row["prompt"], where)
        if system_prompt and prompt[0].get("role") != "system":
            prompt.insert(0, {"role": "system", "content": system_prompt})
        return prompt
    messages: list[Message] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.extend(copy.deepcopy(few_shot or []))
    messages.append({"role": "user", "content": str(row["question"])})
    return messages


def normalize_rows(
    rows: list[Any],
    *,
    name: str,
    system_prompt: str | None,
    few_shot: list[Message] | None,
    message_type: str,
    default_task: str,
) -> list[dict[str, Any]]:
    """Validate and complete rows. Errors name the dataset and the row index."""
    out: list[dict[str, Any]] = []
    seen_ids: set[Any] = set()
    for index, raw in enumerate(rows):
        where = f"row {index} of the {name}"
        if not isinstance(raw, dict):
            raise DatasetError(f"{where} is a {type(raw).__name__}; rows must be dicts with a `prompt` or `question`")
        row = dict(raw)
        row["prompt"] = build_prompt(row, where, system_prompt, few_shot, message_type)
        row["info"] = _parse_info(row.get("info"), where)
        answer = row.get("answer")
        row["answer"] = "" if answer is None else answer if isinstance(answer, str) else str(answer)
        row["task"] = row.get("task") or default_task
        example_id = row.get("example_id")
        if example_id is None or (isinstance(example_id, float) and example_id != example_id):
            example_id = index
        if example_id in seen_ids:
            raise DatasetError(f"{where}: example_id {example_id!r} appears twice; ids must be unique")
        seen_ids.add(example_id)
        row["example_id"] = example_id
        out.append(row)
    return out


def select_rows(rows: list[dict[str, Any]], n: int, seed: int | None) -> list[dict[str, Any]]:
    """The first `n` rows (all when n < 0), after a seeded shuffle when `seed` is given."""
    chosen = list(rows)
    if seed is not None:
        random.Random(seed).shuffle(chosen)
    return chosen if n is None or n < 0 else chosen[:n]


LazyDataset = Callable[[], DatasetLike]
