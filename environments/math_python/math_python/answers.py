"""Math answers: the final \\boxed{} of a reply, checked against the reference with math-verify,
and the GSM8K-format problems the environment uses (a small copy of the gsm8k example's reader,
kept here so this package installs on its own)."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import prime_cli.envs as vf

BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
MAX_ANSWER_CHARS = 200
SPLIT_FILES = {"train": "train.jsonl", "test": "test.jsonl"}


def last_boxed(text: str) -> str | None:
    """The content of the last complete `\\boxed{...}` (nested braces allowed), or None."""
    found = None
    for match in BOX_OPEN.finditer(text or ""):
        depth = 1
        for i in range(match.end(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found = text[match.end():i].strip()
                break
    return found


def math_equal(reference: str, candidate: str | None) -> bool:
    """True when `candidate` is mathematically the same value as `reference` (math-verify)."""
    if candidate is None or not candidate.strip() or len(candidate) > MAX_ANSWER_CHARS:
        return False
    from math_verify import parse, verify

    limit = 5 if threading.current_thread() is threading.main_thread() else None  # SIGALRM: main thread only
    gold = parse(f"${reference.replace(',', '')}$", parsing_timeout=limit)
    guess = parse(f"${candidate}$", parsing_timeout=limit)
    return bool(gold and guess and verify(gold, guess, timeout_seconds=limit))


def data_folder(data_dir: str | None) -> Path:
    """The folder with train.jsonl/test.jsonl: `data_dir`, else $PRIME_DATA_DIR or its gsm8k/."""
    roots = [Path(data_dir).expanduser()] if data_dir else []
    if not roots and os.environ.get("PRIME_DATA_DIR"):
        roots = [Path(os.environ["PRIME_DATA_DIR"]).expanduser()]
    for root in roots:
        for folder in (root, root / "gsm8k"):
            if any((folder / name).is_file() for name in SPLIT_FILES.values()):
                return folder
    where = f"{roots[0]} has no train.jsonl or test.jsonl" if roots else "no data folder given"
    raise vf.EnvConfigError(
        f"math-python: {where}; pass -a '{{\"data_dir\": \"/path/to/gsm8k\"}}' or set PRIME_DATA_DIR to a "
        "folder of GSM8K-format JSONL files (one {\"question\", \"answer\"} object per line)"
    )


def read_problems(folder: Path, split: str, limit: int) -> list[dict[str, Any]]:
    path = folder / SPLIT_FILES[split]
    if not path.is_file():
        raise vf.EnvConfigError(f"math-python: {path} is missing (the {split} split)")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            question, solution = record["question"], str(record["answer"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise vf.DatasetError(f"{path}:{number} is not a JSON object with `question` and `answer`") from None
        answer = solution.rsplit("####", 1)[-1].strip().replace(",", "")
        rows.append({"question": question, "answer": answer})
        if 0 <= limit <= len(rows):
            break
    return rows
