"""The status of a run (eval, GEPA or training): one enum whose values are the strings metadata.json holds.

A member is a `str` (`enum.StrEnum`): it compares equal to its value, hashes like it (so `"failed" in
FINISHED` and a dict keyed by members find plain strings read from disk), and `str()`, f-strings and
`json.dumps` write the value (`failed`), never `RunStatus.FAILED`.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"  # every rollout finished, more errored than allowed
    CANCELLED = "cancelled"
    FAILED = "failed"
    STOPPED = "stopped"  # a training run stopped by a signal (Ctrl-C), or one no process writes to any more

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
