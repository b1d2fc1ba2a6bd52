"""Well-known benchmark datasets by short name (`load_example_dataset("gsm8k", "test")`), the boxed-answer
helpers and the system prompts that go with them, as verifiers environments use them.

Rows come from local files first: `<root>/<name>/<split>.jsonl` with root `$PRIME_DATA_DIR` (or a folder
given as `data_dir`), the layout of the project's shared data folder. Without one, the `datasets` package
loads the hub copy, which it reads from the local Hugging Face cache when it is there; nothing here
downloads by itself, and a missing copy is one DatasetError saying where to put the file.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DatasetError

BOXED_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
THINK_BOXED_SYSTEM_PROMPT = (
    "Think step-by-step inside <think>...</think> tags. Then, give your final answer inside \\boxed{}."
)


def extract_boxed_answer(text: str, strict: bool = False) -> str:
    """The content of the last `\\boxed{...}` in `text` (nested braces kept). Without one: `""` when
    `strict` (a reward should not credit an unformatted reply), else `text` itself."""
    start = text.rfind("\\boxed{")
    if start == -1:
        return "" if strict else text
    depth, i = 1, start + len("\\boxed{")
    for i in range(start + len("\\boxed{"), len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + len("\\boxed{"):i]
    return "" if strict else text


def extract_hash_answer(text: str) -> str:
    """GSM8K's reference answer: what follows `####` (the whole text when there is none)."""
    return text.split("####")[1].strip() if "####" in text else text


@dataclass(frozen=True)
class ExampleDataset:
    hub_id: str
    config: str | None
    default_split: str
    to_row: Callable[[dict[str, Any]], dict[str, Any]]


def _question_answer(question: str, answer: str, transform: Callable[[str], str] = str) -> Callable[[dict], dict]:
    return lambda record: {"question": record[question], "answer": transform(record[answer])}


def _lettered(record: dict[str, Any]) -> dict[str, Any]:
    letters = "ABCDEFGHIJ"
    choices = record.get("choices") or record.get("options") or []
    lines = "\n".join(f"{letters[i]}: {choice}" for i, choice in enumerate(choices))
    answer = record["answer"]
    return {"question": f"Question: {record['question']}\n\n{lines}",
            "answer": letters[answer] if isinstance(answer, int) else str(answer)}


EXAMPLE_DATASETS: dict[str, ExampleDataset] = {
    "gsm8k": ExampleDataset("openai/gsm8k", "main", "test", _question_answer("question", "answer", extract_hash_answer)),
    "math": ExampleDataset("chiayewken/competition_math", None, "train",
                           _question_answer("problem", "solution", extract_boxed_answer)),
    "math500": ExampleDataset("HuggingFaceH4/MATH-500", None, "test", _question_answer("problem", "answer")),
    "aime2024": ExampleDataset("HuggingFaceH4/aime_2024", None, "train",
                               _question_answer("problem", "answer", lambda a: str(int(a)))),
    "amc2023": ExampleDataset("knoveleng/AMC-23", None, "train", _question_answer("problem", "answer")),
    "mmlu": ExampleDataset("cais/mmlu", "all", "dev", _lettered),
    "mmlu_pro": ExampleDataset("TIGER-Lab/MMLU-Pro", None, "validation", _lettered),
}


def _local_file(name: str, split: str, data_dir: str | Path | None) -> Path | None:
    roots = [Path(data_dir).expanduser()] if data_dir else []
    if os.environ.get("PRIME_DATA_DIR"):
        roots.append(Path(os.environ["PRIME_DATA_DIR"]).expanduser())
    for root in roots:
        for candidate in (root / name / f"{split}.jsonl", root / f"{split}.jsonl"):
            if candidate.is_file():
                return candidate
    return None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number} is not valid JSON ({exc.msg})") from None
    return records


def _hub_records(name: str, spec: ExampleDataset, split: str) -> list[dict[str, Any]]:
    hint = (f"put {split}.jsonl under $PRIME_DATA_DIR/{name}/ (one JSON object per line, as {spec.hub_id} "
            f"has them)")
    try:
        from datasets import load_dataset  # lazy: optional dependency
    except ImportError:
        raise DatasetError(f"load_example_dataset({name!r}): no local copy and no `datasets` package; {hint}, "
                           "or `pip install datasets` to read the Hugging Face cache") from None
    try:
        return load_dataset(spec.hub_id, spec.config, split=split).to_list()
    except Exception as exc:  # offline, not cached, unknown split: the library's many error types
        raise DatasetError(f"load_example_dataset({name!r}): {spec.hub_id} split {split!r} is not available "
                           f"here ({type(exc).__name__}); {hint}") from None


def load_example_dataset(name: str = "gsm8k", split: str | None = None, n: int | None = None, seed: int = 0,
                         data_dir: str | Path | None = None) -> Any:
    """`question`/`answer` rows of a known dataset; `n` > 0 takes that many after a seeded shuffle.

    A `datasets.Dataset` when that package is installed (environments call `.select`, `.map` on it),
    else a list of dicts."""
    spec = EXAMPLE_DATASETS.get(name)
    if spec is None:
        raise DatasetError(f"load_example_dataset: unknown dataset {name!r}; known: {', '.join(EXAMPLE_DATASETS)}")
    split = split or spec.default_split
    local = _local_file(name, split, data_dir)
    records = _read_jsonl(local) if local else _hub_records(name, spec, split)
    if n is not None and n > 0:
        records = random.Random(seed).sample(records, min(n, len(records)))
    try:
        rows = [spec.to_row(record) for record in records]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        where = local or spec.hub_id
        raise DatasetError(f"load_example_dataset({name!r}): a row of {where} lacks the fields "
                           f"{spec.hub_id} has ({type(exc).__name__}: {exc})") from None
    try:
        from datasets import Dataset  # lazy: optional dependency
    except ImportError:
        return rows
    return Dataset.from_list(rows)
