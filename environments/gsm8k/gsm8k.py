"""gsm8k: grade-school math word problems, answered inside \\boxed{}.

Single turn. The last `\\boxed{...}` of the reply is compared with the reference number by
math-verify (a sympy-based checker: `18`, `18.0`, `\\$18`, `1,000` and `\\frac{1}{2}` are read as
numbers, not strings), plus a small format reward for exactly one complete box. Data comes from a
local folder of GSM8K JSONL files (`data_dir`, else `$PRIME_DATA_DIR`), else the hub dataset when
`datasets` is installed.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import prime_cli.envs as vf

SYSTEM_PROMPT = (
    "Solve the math problem step by step. End your reply with the final answer, a number only, "
    "inside \\boxed{}, for example \\boxed{42}."
)
HUB_DATASET = "openai/gsm8k"
SPLIT_FILES = {"train": "train.jsonl", "test": "test.jsonl"}
MAX_ANSWER_CHARS = 200  # longer "answers" are not numbers; also keeps sympy away from huge inputs
BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")


def boxed_contents(text: str) -> list[str]:
    """The contents of every complete `\\boxed{...}` in `text`, nested braces included."""
    found = []
    for match in BOX_OPEN.finditer(text or ""):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    found.append(text[start:i])
                    break
    return found


def last_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}`, or None when there is none."""
    boxes = boxed_contents(text)
    return boxes[-1].strip() if boxes else None


def math_equal(reference: str, candidate: str | None) -> bool:
    """True when `candidate` is mathematically the same value as `reference` (math-verify)."""
    if candidate is None or not candidate.strip() or len(candidate) > MAX_ANSWER_CHARS:
        return False
    from math_verify import parse, verify

    # math-verify times out with SIGALRM, which only the main thread may set.
    limit = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(f"${reference.replace(',', '')}$", parsing_timeout=limit)
    guess = parse(f"${candidate}$", parsing_timeout=limit)
    if not gold or not guess:
        return False
    return bool(verify(gold, guess, timeout_seconds=limit))


def final_number(solution: str) -> str:
    """GSM8K's reference answer: the text after the last `####`, without thousands separators."""
    return solution.rsplit("####", 1)[-1].strip().replace(",", "")


# -- data ----------------------------------------------------------------------------------------


def resolve_data_dir(data_dir: str | None) -> Path | None:
    """The folder holding train.jsonl/test.jsonl: `data_dir`, else $PRIME_DATA_DIR (or its gsm8k/)."""
    if data_dir:
        folder = Path(data_dir).expanduser()
        if not (folder / SPLIT_FILES["test"]).is_file() and (folder / "gsm8k" / SPLIT_FILES["test"]).is_file():
            folder = folder / "gsm8k"
        if not any((folder / name).is_file() for name in SPLIT_FILES.values()):
            raise vf.EnvConfigError(
                f"gsm8k: data_dir {folder} has neither train.jsonl nor test.jsonl; point it at a folder "
                "of GSM8K JSONL files (one {\"question\", \"answer\"} object per line)"
            )
        return folder
    root = os.environ.get("PRIME_DATA_DIR")
    if root:
        for folder in (Path(root).expanduser() / "gsm8k", Path(root).expanduser()):
            if any((folder / name).is_file() for name in SPLIT_FILES.values()):
                return folder
    return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise vf.DatasetError(f"{path}:{number} is not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "question" not in record or "answer" not in record:
                raise vf.DatasetError(f"{path}:{number} needs the GSM8K fields `question` and `answer`")
            rows.append(record)
    return rows


def hub_records(split: str) -> list[dict[str, Any]]:
    from datasets import load_dataset

    return load_dataset(HUB_DATASET, "main", split=split).to_list()


def data_source(data_dir: str | None) -> Path | str:
    """A local folder, or "hub" when only the `datasets` package can supply the data."""
    folder = resolve_data_dir(data_dir)
    if folder is not None:
        return folder
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise vf.EnvConfigError(
            "gsm8k has no data: pass -a '{\"data_dir\": \"/path/to/gsm8k\"}' (a folder with train.jsonl "
            "and test.jsonl), set PRIME_DATA_DIR, or `pip install datasets` to download openai/gsm8k"
        ) from None
    return "hub"


def split_records(source: Path | str, split: str) -> list[dict[str, Any]]:
    if source == "hub":
        return hub_records(split)
    path = Path(source) / SPLIT_FILES[split]
    if not path.is_file():
        raise vf.EnvConfigError(f"gsm8k: {path} is missing (the {split} split)")
    return read_jsonl(path)


def to_rows(records: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    chosen = records if limit < 0 else records[:limit]
    return [
        {"question": r["question"], "answer": final_number(str(r["answer"])), "info": {"solution": r["answer"]}}
        for r in chosen
    ]


def load_environment(
    data_dir: str | None = None,
    num_train_examples: int = -1,
    num_eval_examples: int = -1,
    system_prompt: str = SYSTEM_PROMPT,
    format_weight: float = 0.2,
) -> vf.Environment:
    """GSM8K environment.

    Args:
        data_dir: folder with train.jsonl and test.jsonl (default: $PRIME_DATA_DIR, then the hub).
        num_train_examples / num_eval_examples: rows kept from each split (-1: all).
        system_prompt: the instruction given to the model (GEPA optimises it).
        format_weight: weight of the one-\\boxed{} format reward.
    """
    source = data_source(data_dir)
    parser = vf.Parser(extract_fn=last_boxed)

    def correct_answer(completion, answer, parser) -> float:
        """1.0 when the last \\boxed{} holds the reference number (checked by math-verify)."""
        return 1.0 if math_equal(answer, parser.parse_answer(completion)) else 0.0

    def boxed_format(completion) -> float:
        """1.0 when the reply has exactly one complete \\boxed{...}."""
        text = vf.messages.last_assistant_text(completion) or ""
        return 1.0 if len(boxed_contents(text)) == 1 else 0.0

    rubric = vf.Rubric(funcs=[correct_answer, boxed_format], weights=[1.0, format_weight], parser=parser)
    return vf.SingleTurnEnv(
        dataset=lambda: to_rows(split_records(source, "train"), num_train_examples),
        eval_dataset=lambda: to_rows(split_records(source, "test"), num_eval_examples),
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
    )
