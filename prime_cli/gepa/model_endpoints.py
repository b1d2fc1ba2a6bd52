"""Where a GEPA run's two models are served: the endpoints of the student (-m, -b) and of the reflection
model (-M, --reflection-base-url), resolved as `prime eval run` resolves -m. The preflight checks them,
the run opens them, the cost meter prices them."""

from __future__ import annotations

from typing import Any

from prime_cli.clients.command_flags import is_local_model

from .config import GepaConfig


def model_specs(config: GepaConfig, model: str, base_url: str | None) -> list[Any]:
    """The endpoints of the student or the reflection model, resolved as `prime eval run` resolves -m."""
    from prime_cli.clients.endpoints import endpoint_specs  # lazy: already loaded

    return endpoint_specs(model, base_url, config.api_key_var, config.endpoints_path)


def reflection_url(config: GepaConfig) -> str | None:
    if is_local_model(config.reflector) and not config.reflection_base_url:
        return None  # the embedded model: its server is found or started for the run
    return config.reflection_base_url or config.base_url
