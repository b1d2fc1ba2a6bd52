"""`MathRubric`: one reward, `correct_answer`, 1.0 when the parsed answer is mathematically the reference.

Equivalence is math-verify's (`1/2` = `0.5` = `\\frac{1}{2}`), which the environment must have installed
(`math-verify` in its dependencies); without it the rubric is refused when built, in one line. The default
parser drops `<think>` reasoning and takes the last `\\boxed{}` (strictly: an unboxed reply scores 0), as
verifiers 0.2 does (0.1.x read an unboxed reply whole).
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

from prime_cli.envs.errors import EnvConfigError
from prime_cli.envs.example_datasets import extract_boxed_answer
from prime_cli.envs.parsers import MaybeThinkParser, Parser
from prime_cli.envs.types import Messages

from .rubric import RewardFunc, Rubric

MAX_VERIFY_CHARS = 50_000


def math_equivalent(response: str, answer: str, timeout_seconds: int = 5) -> bool:
    """Whether `response` and `answer` denote the same value; False when either does not parse."""
    from math_verify import parse, verify  # lazy: optional dependency

    if not response or len(response) > MAX_VERIFY_CHARS:
        return False
    # math-verify times out with SIGALRM, which only the main thread may use
    limit = timeout_seconds if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse(f"\\boxed{{{answer}}}", parsing_timeout=limit)
        guess = parse(f"\\boxed{{{response}}}", parsing_timeout=limit)
        return bool(verify(gold, guess, timeout_seconds=limit))
    except Exception:  # math-verify's own timeout and parse errors: not a match
        return False


class MathRubric(Rubric):
    def __init__(self, funcs: list[RewardFunc] | None = None, weights: list[float] | None = None,
                 parser: Parser | None = None, timeout_seconds: float = 5, **kwargs: Any) -> None:
        try:
            import math_verify  # noqa: F401  # lazy: optional dependency
        except ImportError:
            raise EnvConfigError("MathRubric needs the math-verify package: add `math-verify` to the environment's "
                                 "dependencies (or `pip install math-verify`)") from None
        kwargs.pop("max_workers", None)  # verifiers' process pool size; scoring here runs in-process
        parser = parser or MaybeThinkParser(extract_fn=partial(extract_boxed_answer, strict=True))
        super().__init__(funcs=funcs, weights=weights, parser=parser, **kwargs)
        self.timeout_seconds = timeout_seconds
        self.add_reward_func(self.correct_answer)

    def correct_answer(self, parser: Parser, completion: Messages, answer: str, **kwargs: Any) -> float:
        response = parser.parse_answer(completion) or ""
        return 1.0 if math_equivalent(str(response), str(answer), int(self.timeout_seconds)) else 0.0
