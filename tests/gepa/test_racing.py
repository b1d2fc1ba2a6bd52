"""A child that won its minibatch is validated on the first half of the validation order, and on the rest
only if it is not below its parent there (engine._race); the budget's partial validations are apart."""

from __future__ import annotations

import asyncio
import io
import re
import zlib

from prime_cli.gepa.api import run_search
from prime_cli.gepa.display import _verdict
from prime_cli.gepa.validation import validation_order
from tests.gepa import support
from tests.gepa.test_budget_plan import NUM_VAL, config, lines, noisy_student_reply


def careless_reflector(messages, tools, sampling_args) -> str:
    """Adds the kinds it sees, as support.reflector_reply, and drops one it had in a third of its replies: such
    a child can win its minibatch (a kind added) and be worse on validation (a kind lost)."""
    text = messages[-1]["content"]
    reply = support.reflector_reply(messages, tools, sampling_args)
    lines_ = support.current_prompt(reply).splitlines()
    kinds = [line for line in lines_ if re.search(r"kind \w+", line)]
    if kinds and zlib.crc32(text.encode()) % 3 == 0:
        lines_.remove(kinds[zlib.crc32(text.encode()) % len(kinds)])
    return "Analysis.\n```\n" + "\n".join(lines_) + "\n```"


def search(cfg):
    student = support.Pool(support.ScriptedClient(noisy_student_reply), "student")
    _, run_dir = asyncio.run(run_search(cfg, False, io.StringIO(),
                                        pools=(student, support.reflector(careless_reflector))))
    return run_dir


def test_a_child_below_its_parent_on_the_first_half_is_validated_there_only(workdir):
    halves = 0
    for seed in (0, 1, 2):
        halves += check_run(search(config(workdir / f"run{seed}", max_calls=400, seed=seed)), seed)
    assert halves > 0  # the careless reflector makes some minibatch winners worse than their parents


def test_the_iteration_line_says_why_a_child_was_validated_in_part():
    line = {"accepted": True, "child_idx": 5, "child_val_rows_run": 10, "child_val_cut": "race"}
    assert _verdict(line, 20) == "accepted as candidate 5 (validated on 10 of 20 rows: it was below its parent on the first half)"
    assert _verdict({**line, "child_val_cut": "budget"}, 20).endswith("(validated on 10 of 20 rows: the budget left)")


def check_run(run_dir, seed) -> int:
    """Every child validated on half of the rows was below its parent there; every other one was not."""
    candidates = lines(run_dir / "candidates.jsonl")
    first = sorted(validation_order(NUM_VAL, seed)[:NUM_VAL // 2])
    halves = 0
    cuts = {it["child_idx"]: it["child_val_cut"] for it in lines(run_dir / "iterations.jsonl") if it["accepted"]}
    for child in candidates[1:]:
        parent = candidates[child["parent_idx"]]
        mine = sum(child["val_scores"][r] or 0.0 for r in first if parent["val_scores"][r] is not None)
        theirs = sum(parent["val_scores"][r] or 0.0 for r in first if child["val_scores"][r] is not None)
        if child["val_rows_run"] == NUM_VAL // 2:
            halves += 1
            assert mine < theirs and all(child["val_scores"][r] is None for r in range(NUM_VAL) if r not in first)
            assert cuts[child["candidate_idx"]] == "race"
        elif child["val_rows_run"] == NUM_VAL:
            assert mine >= theirs
    return halves
