"""The status of a run (eval, GEPA or training): one enum whose values are the strings metadata.json holds.

A member is a `str`: it compares equal to its value, hashes like it (so `"failed" in FINISHED` and a dict
keyed by members find plain strings read from disk), and `str()`, f-strings and `json.dumps` write the
value (`failed`), never `RunStatus.FAILED`: a plain `(str, Enum)` does neither the hashing nor the printing
on every supported Python (3.10 hashes by name; str() says `RunStatus.FAILED`), and `enum.StrEnum` is 3.11+.
"""

from __future__ import annotations

from enum import Enum


class RunStatus(str, Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"  # every rollout finished, more errored than allowed
    CANCELLED = "cancelled"
    FAILED = "failed"
    STOPPED = "stopped"  # a training run that no process writes to any more (derived, never saved)

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def read(cls, value: object) -> RunStatus | str:
        """A status read from a file: its member, a missing one as COMPLETED (another tool's finished run
        has none), and an unknown string as it is (shown, never refused)."""
        if not value:
            return cls.COMPLETED
        try:
            return cls(value)
        except ValueError:
            return str(value)


FINISHED = frozenset({RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS})  # nothing left to run: -R skips it
RESUMABLE = frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED})
