"""The error classes of verifiers' v1 API that tasksets raise or catch."""

from __future__ import annotations


class EnvError(Exception):
    """An environment failed."""


class TaskError(EnvError):
    """A task's own code (setup, scoring) failed."""


class ToolsetError(EnvError):
    """A toolset failed."""


class HarnessError(EnvError):
    """The program the model runs in failed."""


class RolloutError(EnvError):
    """A rollout could not finish."""


class SandboxError(EnvError):
    """The sandbox a rollout runs in failed."""


class ProviderError(EnvError):
    """The model provider failed."""


class InterceptionError(EnvError):
    """A request or response rewrite failed."""


class TunnelError(EnvError):
    """A tunnel to the model endpoint failed."""
