"""Clients for a model's endpoints, one per replica, handed out round-robin per example group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prime_cli.envs.types import ChatClient

from .errors import ClientConfigError
from .registry import EndpointSpec
from .retry import RetryCounts

KINDS = ("openai", "litellm")


def make_client(spec: EndpointSpec, **kwargs: Any) -> ChatClient:
    """The client class for `spec.kind`, built with `kwargs`: the settings every kind takes (EndpointClient:
    max_concurrent, retry, timeout, return_token_ids)."""
    if spec.kind == "openai":
        from .openai_client import OpenAIChatClient  # lazy: already loaded

        return OpenAIChatClient(spec, **kwargs)
    if spec.kind == "litellm":
        from .litellm_client import LiteLLMChatClient  # lazy: already loaded

        return LiteLLMChatClient(spec, **kwargs)
    raise ClientConfigError(f"endpoint '{spec.endpoint_id}': unknown client kind '{spec.kind}' (known: {', '.join(KINDS)})")


class ClientPool:
    """One client per endpoint replica. All of an example group's rollouts go to one replica."""

    def __init__(self, specs: Sequence[EndpointSpec], **client_kwargs: Any) -> None:
        if not specs:
            raise ClientConfigError("no endpoint to send requests to")
        self.specs = list(specs)
        # Built eagerly, so that an unset key variable or a missing extra shows before any rollout.
        self.clients: list[Any] = [make_client(spec, **client_kwargs) for spec in self.specs]

    @property
    def endpoint_count(self) -> int:
        return len(self.clients)

    def for_group(self, group_index: int) -> tuple[ChatClient, str]:
        """The client and model id that serve example group `group_index` (round-robin)."""
        index = group_index % len(self.clients)
        return self.clients[index], self.specs[index].model

    def retry_counts(self) -> RetryCounts:
        """The retries of every replica's client so far, added up."""
        total = RetryCounts()
        for client in self.clients:
            total.add(getattr(client, "retry_counts", None))
        return total

    def __repr__(self) -> str:
        urls = ", ".join(spec.url or spec.model for spec in self.specs)
        return f"ClientPool({self.endpoint_count} endpoint(s): {urls})"

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()
