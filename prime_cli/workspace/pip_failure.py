"""The one line of a failed pip's output that says why (pip prints many, and retries): install.py and
index_install.py both show it."""

from __future__ import annotations

# pip's lines that say why an install failed, most telling first
TELLING = ("No matching distribution", "Could not find a version", "requires a different Python",
           "Could not build", "Failed to build", "ResolutionImpossible", "conflicting dependencies",
           "ModuleNotFoundError", "No module named", "BackendUnavailable")


def pip_failure_reason(output: str) -> str:
    """The one line of a failed pip's output that says the most (it prints many, and retries)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for phrase in TELLING:
        for line in lines:
            if phrase in line:
                return line.removeprefix("ERROR: ")
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR:")]
    return errors[0] if errors else (lines[-1] if lines else "pip printed nothing")
