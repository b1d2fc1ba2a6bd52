"""--state-columns that the rollouts' state never has: said once, in one warning line, and the run goes on.

Which keys a state gets is only known once rollouts ran (an environment sets them in setup_state,
env_response or its reward functions), so the check is made on the first rollouts of the run, not up
front: after `CHECKED_ROLLOUTS` of them, a column none of them had is named, with the closest key they
did have. A column that only some rollouts have (set on a failure, say) is not warned about.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

CHECKED_ROLLOUTS = 4


class StateColumnCheck:
    def __init__(self, columns: list[str], warn: Callable[[str], None]) -> None:
        self.columns = list(dict.fromkeys(columns))
        self.warn = warn
        self.seen: set[str] = set()
        self.keys: set[str] = set()
        self.checked = 0

    def see(self, state: dict[str, Any]) -> None:
        if not self.columns or self.checked >= CHECKED_ROLLOUTS:
            return
        self.checked += 1
        self.keys.update(str(k) for k in state)
        self.seen.update(c for c in self.columns if c in state)
        if self.checked == CHECKED_ROLLOUTS and (missing := [c for c in self.columns if c not in self.seen]):
            self.warn(self.line(missing))

    def line(self, missing: list[str]) -> str:
        named = ", ".join(f"'{c}'" + self._hint(c) for c in missing)
        return (f"--state-columns: the state of none of the first {self.checked} rollouts has {named}, so the "
                f"reflection model is shown nothing for {'it' if len(missing) == 1 else 'them'}; their states have: "
                f"{', '.join(sorted(self.keys))}")

    def _hint(self, column: str) -> str:
        close = difflib.get_close_matches(column, sorted(self.keys), n=1, cutoff=0.7)
        return f" (did you mean '{close[0]}'?)" if close else ""
