"""Errors of the model-access layer.

- `ClientConfigError` is a configuration mistake found before any request is sent (a bad endpoint
  registry, an unset API-key variable, a missing optional extra). It is a `UserInputError`, so the
  CLI prints its message as one line and exits with code 2.
- `FatalEndpointError` is a model failure that no retry can fix and that will hit every other
  request to the same endpoint too (rejected key, unknown model, server unreachable). It is a
  `FatalError`: the rollout records it as fatal and every engine stops the run on it.

Messages are single lines and never contain API keys.
"""

from __future__ import annotations

from prime_cli.envs.errors import FatalError, ModelError, UserInputError


class ClientConfigError(UserInputError):
    """The endpoint configuration is wrong; the message says what and how to fix it."""


class FatalEndpointError(ModelError, FatalError):
    """The endpoint cannot serve any request (HTTP 401/403/404, or unreachable after retries)."""


class MalformedResponseError(ModelError):
    """The server answered with a body that is not a valid completion (retried)."""
