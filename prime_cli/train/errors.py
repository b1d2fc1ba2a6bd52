"""Errors of `prime train` that the CLI shows as one `error:` line (exit code 2)."""

from __future__ import annotations

from prime_cli.envs.errors import UserInputError


class TrainConfigError(UserInputError):
    """A mistake in the training config, its overrides, or the installed trainers.

    The message is the one line shown to the user: it names the key (or the file) and the fix.
    """
