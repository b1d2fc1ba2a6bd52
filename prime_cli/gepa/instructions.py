"""A prompt's instructions and the evidence against each: what the edit step shows the reflection model.

Reflection only ever sees the failures of the prompt it improves, so a wrong instruction that came in with
good ones (a prompt better overall is accepted) is never taken out: nothing points at it. The search has
the evidence, for free: every accepted child was scored on the same validation rows as its parent, so the
rows that got worse when an instruction entered a lineage are known. An instruction is a non-empty line of
the prompt (reflection models write rules one per line or one per paragraph; a paragraph is one line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .state import Candidate


def instruction_lines(prompt: str) -> list[str]:
    return [line.strip() for line in prompt.splitlines() if line.strip()]


@dataclass
class Instruction:
    text: str
    added_by: int | None  # the candidate whose prompt first had it in this lineage (None: the seed's)
    worse_rows: list[int] = field(default_factory=list)  # validation rows that got worse when it came in


def lineage(candidates: Sequence[Candidate], idx: int) -> list[Candidate]:
    """The candidate and its ancestors, the seed first."""
    chain = []
    current: int | None = idx
    while current is not None:
        chain.append(candidates[current])
        current = candidates[current].parent
    return chain[::-1]


def worse_rows(parent: Candidate, child: Candidate) -> list[int]:
    """Validation rows both were scored on where the child scores lower."""
    return [row for row, (p, c) in enumerate(zip(parent.val_scores, child.val_scores, strict=True))
            if p is not None and c is not None and c < p]


def instructions_with_evidence(candidates: Sequence[Candidate], idx: int) -> list[Instruction]:
    """Each instruction of candidate `idx`, with the candidate that brought it in and the validation rows
    that got worse at that step (rows still failing for `idx` only: those it could fix by taking it out)."""
    chain = lineage(candidates, idx)
    current = candidates[idx]
    lines = [set(instruction_lines(c.prompt)) for c in chain]
    result = []
    for text in instruction_lines(current.prompt):
        added_by, rows = None, []
        for step, (before, after) in enumerate(zip(chain, chain[1:], strict=False)):
            if text in lines[step + 1] and text not in lines[step]:
                added_by = after.idx
                rows = [r for r in worse_rows(before, after)
                        if current.val_scores[r] is not None and (current.val_scores[r] or 0.0) < (before.val_scores[r] or 0.0)]
        result.append(Instruction(text, added_by, rows))
    return result


def dropped_lines(candidates: Sequence[Candidate]) -> set[str]:
    """Instructions some accepted child took out of its parent's prompt (an edit step, or a rewrite)."""
    return {line for child in candidates if child.parent is not None
            for line in instruction_lines(candidates[child.parent].prompt) if line not in instruction_lines(child.prompt)}


def merged_prompt(candidates: Sequence[Candidate], keep: int, other: int) -> str | None:
    """Candidate `keep`'s prompt plus the instructions of `other` it lacks, except those some accepted child
    took out of its parent (taken out on purpose somewhere, they do not come back through a merge). None when
    that adds nothing."""
    have = set(instruction_lines(candidates[keep].prompt))
    gone = dropped_lines(candidates)
    extra = list(dict.fromkeys(line for line in instruction_lines(candidates[other].prompt)
                               if line not in have and line not in gone))
    if not extra:
        return None
    return "\n".join([*([candidates[keep].prompt.rstrip()] if candidates[keep].prompt.strip() else []), *extra])
