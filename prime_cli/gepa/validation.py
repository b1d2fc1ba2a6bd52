"""Which validation rows a child that won its minibatch is scored on: all of them, or as many as the budget
left pays for.

The budget is planned (stopping.BudgetSpent) so that a winner can always be validated on at least
`GepaConfig.min_validation_rows` rows (10, or every row when -N is smaller): fewer than 10 rows would let a
child take the lead on a handful of lucky rows. Late in the budget a winner is validated on the longest
prefix of one fixed order of the validation rows that the budget left pays for (rollouts already charged
are free), and its other rows stay unscored (None in its val_scores, `val_rows_run` counts the rows it was
run on).

The order is a shuffle seeded by --seed and kept apart from the search's RNG (drawing it changes no other
choice): every partially validated candidate shares the same first rows, so any two of them, and each of
them with every fully validated one, are compared on the same rows (pareto.best_candidate), and a prefix of
a shuffle is a fair sample even when the environment's validation split comes in some order (by
difficulty, by topic). The same config gives the same order, so a resumed run validates the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence


def validation_order(num_val: int, seed: int) -> list[int]:
    """The validation rows in the order a partial validation takes them."""
    order = list(range(num_val))
    random.Random(f"gepa-validation-order:{seed}").shuffle(order)
    return order


def payable_rows(order: Sequence[int], allowance: int, new_rollouts: Callable[[int], int]) -> list[int]:
    """The longest prefix of `order` whose rollouts not yet charged (`new_rollouts(row)`) fit in `allowance`."""
    rows: list[int] = []
    for row in order:
        allowance -= new_rollouts(row)
        if allowance < 0:
            break
        rows.append(row)
    return rows


def rows_run(order: Sequence[int], count: int | None) -> list[int]:
    """The rows a candidate validated on `count` rows was run on, in row order (None: every row)."""
    return sorted(order if count is None else order[:count])
