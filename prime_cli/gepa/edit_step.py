"""The edit step: a proposal that shows the reflection model the best prompt's instructions one by one,
each with the validation rows that got worse when it came in, beside the prompt's failures on train rows,
and asks it to take out (or correct) what hurts as well as to add what is missing.

When it runs: once from each candidate that becomes the best (its instructions are then what the run
would hand back), and, when proposals run dry (the reflection model has nothing new to try, or the last
proposals only repeated known rollouts), once more before the search stops. It is planned at a commit,
from committed data only, so a resumed run makes the same edit steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .instructions import Instruction
from .reflection import render_record

EDIT_TEMPLATE = """You are improving the system prompt of a language-model assistant.

The current system prompt:
```
{prompt}
```

Its instructions, one by one, with the evidence against each (validation rows that got worse when the
instruction was added; the rows are among the examples below):
{instructions}

Below are {count} task(s) the assistant attempted with the current prompt. Each shows the input, the
assistant's output, the expected answer and the reward (higher is better).{metrics_note}

{examples}

Some instructions may be wrong: an instruction that made rows worse, or that the expected answers
contradict, should be taken out or corrected. Keep every instruction that works and add what is
missing. Reply with the complete new system prompt inside one ``` fenced block."""


def _evidence(item: Instruction, numbers: dict[int, int]) -> str:
    if item.added_by is None:
        return "in the seed prompt: no earlier prompt to compare with"
    shown = [f"Example {numbers[r]}" for r in item.worse_rows if r in numbers]
    unshown = len(item.worse_rows) - len(shown)
    if not item.worse_rows:
        return f"added by candidate {item.added_by}; no validation row got worse when it was added"
    listed = f": {', '.join(shown)}" + (f", and {unshown} more not shown" if unshown and shown else "")
    return (f"added by candidate {item.added_by}; {len(item.worse_rows)} validation row(s) got worse when it was "
            f"added" + (listed if shown else " (not shown)"))


def edit_prompt(current: str, instructions: Sequence[Instruction], val_records: dict[int, dict[str, Any]],
                train_records: Sequence[dict[str, Any]], metric_names: list[str], chars: int | None = None) -> str:
    """`val_records`: the current prompt's record on each validation row named as evidence (by row);
    `chars`: each long field cut to about that many characters (None: as recorded; fitting.py)."""
    numbers = {row: i + 1 for i, row in enumerate(val_records)}
    examples = [render_record(numbers[row], record, chars, current) + "\n### Split: validation (evidence)"
                for row, record in val_records.items()]
    examples += [render_record(len(examples) + i + 1, record, chars, current) for i, record in enumerate(train_records)]
    listed = "\n".join(f'{i + 1}. "{item.text}" ({_evidence(item, numbers)})' for i, item in enumerate(instructions))
    note = f"\nMetrics measured: {', '.join(metric_names)}." if metric_names else ""
    return EDIT_TEMPLATE.format(prompt=current or "(empty)", instructions=listed or "(none)",
                                count=len(examples), metrics_note=note, examples="\n\n".join(examples))
