"""What the OpenAI-compatible and the LiteLLM client share: one constructor contract, the per-endpoint
concurrency limit, the retried call and closing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prime_cli.envs.types import ChatResponse

from .limits import LoopSemaphore
from .registry import EndpointSpec
from .retry import RetryCounts, RetryPolicy, call_with_retries, logger


class EndpointClient:
    """A client of one endpoint: `spec`, then keyword-only settings that `make_client` passes to every kind.
    A kind does its own setup in `_connect` and keeps this constructor."""

    shown_as = "url"  # the spec field that __repr__ names the endpoint by

    def __init__(self, spec: EndpointSpec, *, max_concurrent: int = 32, retry: RetryPolicy | None = None,
                 timeout: float = 600.0, return_token_ids: bool = False) -> None:
        self._limit = LoopSemaphore(max_concurrent)  # checks max_concurrent >= 1 before anything else
        self.spec = spec
        self.max_concurrent = max_concurrent
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.return_token_ids = return_token_ids
        self.retry_counts = RetryCounts()
        self._secrets: tuple[str, ...] = ()  # values that errors and logs must never show
        self._connect()

    def _connect(self) -> None:
        """The kind's own setup (its SDK, the key, `_secrets`), after the shared settings are checked and set."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(endpoint_id={self.spec.endpoint_id!r}, "
                f"{self.shown_as}={getattr(self.spec, self.shown_as)!r}, key_var={self.spec.key_var!r}, "
                f"max_concurrent={self.max_concurrent})")

    async def _send(self, request: Callable[[], Awaitable[Any]], convert: Callable[[Any], ChatResponse], *,
                    model: str, describe: str, where: str) -> ChatResponse:
        """`request()` within the concurrency limit, its answer converted, retried by the retry policy."""
        semaphore = self._limit.get()

        async def attempt() -> ChatResponse:
            async with semaphore:
                response = await request()
            return convert(response)

        return await call_with_retries(attempt, self.retry, describe=describe, log=logger, url=where, model=model,
                                       secrets=self._secrets, key_var=self.spec.key_var, counts=self.retry_counts)

    async def aclose(self) -> None:
        """Nothing to close unless the kind holds its own HTTP client."""

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()
