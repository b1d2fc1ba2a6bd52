"""Errors of the model-access layer.

- `ClientConfigError` is a configuration mistake found before any request is sent (a bad endpoint
  registry, an unset API-key variable, a missing optional extra). It is an `EnvConfigError`, so the
  CLI prints its message as one line and exits with code 2.
- `FatalEndpointError` is a model failure that no retry can fix and that will hit every other
  request to the same endpoint too (rejected key, unknown model, server unreachable). The eval
  runner aborts the whole run on it instead of recording one failed rollout after another.

Messages are single lines and never contain API keys.
"""

from __future__ import annotations

from prime_cli.envs.errors import EnvConfigError, ModelError


class ClientConfigError(EnvConfigError):
    """The endpoint configuration is wrong; the message says what and how to fix it."""


class FatalEndpointError(ModelError):
    """The endpoint cannot serve any request (HTTP 401/403/404, or unreachable after retries)."""


class MalformedResponseError(ModelError):
    """The server answered with a body that is not a valid completion (retried)."""
