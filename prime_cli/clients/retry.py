"""The one retry policy of model access.

The SDKs' own retries are off (`max_retries=0`); every failed call comes through `classify`, which
decides: retry (429 honouring Retry-After, 5xx, timeouts, dropped connections, undecodable bodies),
stop the rollout (context-length 400 -> `OverlongPromptError`), fail the call (other 4xx ->
`ModelError`) or abort the run (401/403/404, unreachable server -> `FatalEndpointError`).
Messages and log lines are single lines with known secrets and bearer tokens redacted.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prime_cli.envs.errors import ModelError, OverlongPromptError

from .errors import FatalEndpointError, MalformedResponseError
from .plain_http import HTTPConnectionError

logger = logging.getLogger("prime_cli.clients")
T = TypeVar("T")

OVERLONG_MARKERS = (
    "context length", "context_length", "maximum context", "context window", "too many tokens",
    "prompt is too long", "maximum model length", "max_model_len", "input is too long",
)
_SECRETISH = re.compile(r"(?i)(bearer\s+)\S+|\b(sk|rk|pk)-[A-Za-z0-9_\-]{6,}")


@dataclass
class RetryPolicy:
    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 30.0
    # told of each retry (describe, reason, retry number, max_retries), e.g. to say so on screen
    on_retry: Callable[[str, str, int, int], None] | None = None

    def backoff(self, retry_number: int) -> float:
        """Exponential backoff with +-25% jitter for the n-th retry (1-based), capped at max_delay."""
        base = self.initial_delay * (2 ** max(0, retry_number - 1))
        return min(self.max_delay, base * random.uniform(0.75, 1.25))

    def after_server_delay(self, seconds: float) -> float:
        """The wait a server asked for (Retry-After, capped at max_delay) plus a jitter of up to 10% of it,
        at least up to initial_delay: the calls told the same instant do not all come back in it."""
        asked = min(self.max_delay, seconds)
        return asked + random.uniform(0, max(self.initial_delay, 0.1 * asked))


@dataclass
class Verdict:
    """What to do about one failed attempt."""

    retry: bool
    reason: str
    """Short cause for log lines: 'HTTP 429', 'timeout', 'dropped connection', ..."""
    detail: str = ""
    error: BaseException | None = None
    """For retry=False: the exception to raise."""
    retry_after: float | None = None
    unreachable: str | None = None
    """Set when the connection could not be opened (e.g. 'connection refused')."""

    @property
    def kind(self) -> str:
        """The retry's kind as counted in summaries: 429, 5xx, timeout, connection or malformed."""
        if self.reason == "HTTP 429":
            return "429"
        if self.reason == "timeout" or self.reason == "HTTP 408":
            return "timeout"
        if self.reason.startswith("HTTP "):
            return "5xx"
        if self.reason == "malformed response":
            return "malformed"
        return "connection"


RETRY_KINDS = ("429", "5xx", "timeout", "connection", "malformed")


@dataclass
class RetryCounts:
    """How many model calls needed retries, the retries by kind, and the calls that gave up anyway."""

    calls_retried: int = 0
    gave_up: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def add_retry(self, kind: str, count: int = 1) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + count

    def add(self, other: RetryCounts | dict[str, Any] | None) -> RetryCounts:
        """Add another count (a RetryCounts or its `as_dict()`, e.g. from an earlier run's metadata)."""
        if isinstance(other, dict):
            other = RetryCounts.from_dict(other)
        if other is not None:
            self.calls_retried += other.calls_retried
            self.gave_up += other.gave_up
            for kind, count in other.by_kind.items():
                self.add_retry(kind, count)
        return self

    @property
    def retries(self) -> int:
        return sum(self.by_kind.values())

    def as_dict(self) -> dict[str, Any]:
        ordered = {k: self.by_kind[k] for k in (*RETRY_KINDS, *sorted(self.by_kind)) if k in self.by_kind}
        return {"calls_retried": self.calls_retried, "retries": self.retries, "by_kind": ordered,
                "gave_up": self.gave_up}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetryCounts:
        def count(value: Any) -> int:
            return value if isinstance(value, int) and value > 0 else 0

        kinds = data.get("by_kind") if isinstance(data.get("by_kind"), dict) else {}
        return cls(count(data.get("calls_retried")), count(data.get("gave_up")),
                   {str(k): count(v) for k, v in kinds.items() if count(v)})


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` as one line with the given secrets, bearer tokens and sk-... keys masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _SECRETISH.sub(lambda m: (m.group(1) or "") + "***", text)
    return " ".join(text.split())


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Parse a Retry-After header value (seconds or an HTTP date) into seconds from now (>= 0)."""
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _server_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else str(exc)


def _error_code(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if code is None and isinstance(body, dict):
        inner = body.get("error", body)
        code = inner.get("code") if isinstance(inner, dict) else None
    return str(code or "")


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
    except (TypeError, ValueError):
        pass
    return retry_after_seconds(headers.get("retry-after"))


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc`, its causes and contexts, and the members of exception groups among them."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        chain.append(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        members = getattr(current, "exceptions", None)
        if isinstance(members, list | tuple):
            pending.extend(e for e in members if isinstance(e, BaseException))
    return chain


def _connect_failure(exc: BaseException) -> str | None:
    """'connection refused' (or another reason) when the TCP connection could not be opened."""
    causes = _causes(exc)
    if any(isinstance(item, ConnectionRefusedError) or "connection refused" in str(item).lower() for item in causes):
        return "connection refused"
    for item in causes:
        text = str(item).strip().lower()
        if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo failed" in text:
            return "host name not resolved"
    for item in causes:
        if type(item).__name__ == "ConnectError":
            return " ".join(str(item).split()) or "connection failed"
    return None


def _openai_types() -> Any:
    """The openai module if it is loaded: when it is not, no exception came from it (importing it costs ~0.5 s)."""
    return sys.modules.get("openai")


def _is_overlong(message: str, code: str) -> bool:
    text = message.lower()
    return code == "context_length_exceeded" or any(marker in text for marker in OVERLONG_MARKERS)


def classify(exc: BaseException, *, url: str | None = None, model: str | None = None,
             secrets: Iterable[str] = (), key_var: str | None = None) -> Verdict:
    """Decide what to do about an exception raised by one model call."""
    where = url or "the server"
    secrets = tuple(secrets)
    if isinstance(exc, MalformedResponseError):
        return Verdict(True, "malformed response", redact(str(exc), secrets))
    if isinstance(exc, ModelError):  # already decided (e.g. by a nested client)
        return Verdict(False, type(exc).__name__, error=exc)
    openai = _openai_types()
    status = getattr(exc, "status_code", None)
    is_status_error = isinstance(status, int) and (openai is None or not isinstance(exc, openai.APIResponseValidationError))
    if is_status_error:
        message = redact(_server_message(exc), secrets)
        code = _error_code(exc)
        reason = f"HTTP {status}"
        if status == 429:
            return Verdict(True, reason, message, retry_after=_retry_after(exc))
        if status >= 500 or status == 408:  # a 503 may say when to come back, too
            return Verdict(True, reason, message, retry_after=_retry_after(exc))
        if status in (400, 413, 422) and _is_overlong(message, code):
            return Verdict(False, reason, message, error=OverlongPromptError(f"prompt too long for the context of {model or 'the model'}: {message}"))
        if status in (401, 403):
            what = "rejected the API key" if status == 401 else "denied access"
            hint = f" (the key comes from ${key_var})" if key_var else ""
            return Verdict(False, reason, message, error=FatalEndpointError(f"{where} {what}{hint} (HTTP {status}): {message}"))
        if status == 404:
            if code == "model_not_found" or "model" in message.lower():
                error = FatalEndpointError(f"model '{model}' not found at {where} (HTTP 404)")
            else:
                error = FatalEndpointError(f"{where} answered HTTP 404 ({message}); check the base URL (it usually ends in /v1)")
            return Verdict(False, reason, message, error=error)
        return Verdict(False, reason, message, error=ModelError(f"HTTP {status} from {where}: {message}"))
    if (openai is not None and isinstance(exc, openai.APITimeoutError)) or isinstance(exc, asyncio.TimeoutError) \
            or type(exc).__name__ in ("Timeout", "APITimeoutError", "ReadTimeout"):
        return Verdict(True, "timeout")
    if (openai is not None and isinstance(exc, openai.APIConnectionError)) or isinstance(exc, HTTPConnectionError) \
            or type(exc).__name__ == "APIConnectionError":
        unreachable = _connect_failure(exc)
        if unreachable:
            return Verdict(True, unreachable, unreachable, unreachable=unreachable)
        return Verdict(True, "dropped connection", redact(str(exc.__cause__ or exc), secrets))
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError) or (openai is not None and isinstance(exc, openai.APIResponseValidationError)) \
            or type(exc).__name__ == "ValidationError":
        return Verdict(True, "malformed response", redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, secrets))
    return Verdict(False, type(exc).__name__, error=exc)


def _format_delay(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds >= 1 else f"{seconds:.2f}s"


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    describe: str,
    log: logging.Logger = logger,
    url: str | None = None,
    model: str | None = None,
    secrets: Iterable[str] = (),
    key_var: str | None = None,
    counts: RetryCounts | None = None,
) -> T:
    """Await `fn()` under `policy`; raise the classified error when it gives up. Retries are added to
    `counts` (a call that needed any retry counts once in `calls_retried`, and in `gave_up` if it failed)."""
    secrets = tuple(secrets)
    attempt = 0
    all_unreachable = True
    while True:
        try:
            result = await fn()
        except Exception as exc:  # noqa: BLE001 - classified below; CancelledError is not an Exception
            verdict = classify(exc, url=url, model=model, secrets=secrets, key_var=key_var)
            if counts is not None and attempt > 0 and (not verdict.retry or attempt >= policy.max_retries):
                counts.calls_retried += 1
                counts.gave_up += 1
            if not verdict.retry:
                if verdict.error is exc:
                    raise
                raise verdict.error from None
            all_unreachable = all_unreachable and verdict.unreachable is not None
            if attempt >= policy.max_retries:
                if all_unreachable:
                    raise FatalEndpointError(f"cannot reach {url or describe}: {verdict.unreachable}") from None
                detail = f" ({verdict.detail})" if verdict.detail and verdict.detail != verdict.reason else ""
                raise ModelError(redact(f"{describe} failed after {attempt + 1} attempts; last error: "
                                        f"{verdict.reason}{detail}", secrets)) from None
            attempt += 1
            if counts is not None:
                counts.add_retry(verdict.kind)
            if verdict.retry_after is None:
                delay = policy.backoff(attempt)
            else:
                delay = policy.after_server_delay(verdict.retry_after)
            log.warning("retry %d/%d for %s after %s (waiting %s)", attempt, policy.max_retries,
                        redact(describe, secrets), verdict.reason, _format_delay(delay))
            if policy.on_retry is not None:
                policy.on_retry(redact(describe, secrets), verdict.reason, attempt, policy.max_retries)
            await asyncio.sleep(delay)
            continue
        if counts is not None and attempt > 0:
            counts.calls_retried += 1
        return result
