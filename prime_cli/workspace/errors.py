"""Errors of the workspace engine: bad input with a message naming the problem and the fix."""

from __future__ import annotations

from prime_cli.envs.errors import UserInputError


class WorkspaceError(UserInputError):
    """A bad environment name, a folder that is not a package, a failed install..."""
