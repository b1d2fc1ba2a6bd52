"""A small HTTP/1.1 keep-alive client for JSON POSTs to plain-http endpoints (a local vLLM, the embedded
server, a scripted test server), on asyncio streams.

Why: the OpenAI SDK costs ~0.4-0.9 s to import and ~1-1.5 ms of CPU per request (its parameter transform,
request building and pydantic parsing), which is most of a run's time against a fast local server. Here a
request is a JSON body out and a JSON object back. `OpenAIChatClient` uses this only for `http://` URLs when
no proxy is configured; https endpoints, proxies and everything else keep the SDK.

Failures are raised in the shapes `retry.classify` reads: `HTTPStatusError` (status_code, body, message,
response.headers) for a non-2xx answer, `HTTPConnectionError` (caused by the OSError) when the connection
could not be opened or broke, TimeoutError past `timeout`, json.JSONDecodeError for a body that is not JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any
from urllib.parse import urlsplit

PROXY_VARIABLES = ("http_proxy", "all_proxy")
"""Set (in any case) means requests go through a proxy, which this client does not do."""


class HTTPConnectionError(Exception):
    """The TCP connection could not be opened, or closed before a whole answer came back."""


class HTTPStatusError(Exception):
    """The server answered with a status outside 2xx."""

    def __init__(self, status_code: int, body: Any, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.body = body
        self.message = f"Error code: {status_code} - {body}"
        self.response = _Answer(headers)
        super().__init__(self.message)


class _Answer:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


def usable_for(url: str) -> bool:
    """True for an http:// URL when no proxy variable is set."""
    if urlsplit(url).scheme != "http":
        return False
    return not any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


class PlainHTTPClient:
    """POSTs JSON to `base_url` + path over pooled keep-alive connections of the running event loop."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "localhost"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        netloc = self.host if parts.port is None else f"{self.host}:{parts.port}"
        self._head = "".join(f"{name}: {value}\r\n" for name, value in
                             {"Host": netloc, "Accept": "application/json", "Accept-Encoding": "identity",
                              "Content-Type": "application/json", "Connection": "keep-alive", **headers}.items())
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def post_json(self, path: str, body: dict[str, Any]) -> Any:
        data = json.dumps(body, default=_plain_value).encode()
        request = (f"POST {self.prefix}{path} HTTP/1.1\r\n{self._head}Content-Length: {len(data)}\r\n\r\n").encode() + data
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that opened them
            self._idle, self._loop = [], loop
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof():  # the server has not closed it while it sat idle
                return await self._exchange(reader, writer, request)
            writer.close()
        reader, writer = await self._open()
        return await self._exchange(reader, writer, request)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(self.host, self.port, limit=2 ** 20)
        except OSError as exc:
            raise HTTPConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> Any:
        """Send `request` and return the answer's JSON."""
        keep = False
        try:
            try:
                writer.write(request)
                await writer.drain()
                status_line = await reader.readline()
            except OSError as exc:
                raise HTTPConnectionError(f"connection to {self.host}:{self.port} broke: {exc}") from exc
            if not status_line:
                raise HTTPConnectionError(f"{self.host}:{self.port} closed the connection without an answer")
            try:
                status, headers, payload, keep = await _read_answer(status_line, reader)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                raise HTTPConnectionError(f"connection to {self.host}:{self.port} broke mid-answer: {exc}") from exc
        finally:
            if keep:
                self._idle.append((reader, writer))
            else:
                writer.close()
        if not 200 <= status < 300:
            try:
                error_body: Any = json.loads(payload)
            except ValueError:
                error_body = payload.decode(errors="replace")
            raise HTTPStatusError(status, error_body, headers)
        return json.loads(payload)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            try:
                writer.close()
            except RuntimeError:  # its event loop is already closed
                pass


def _plain_value(value: Any) -> Any:
    """JSON for what json cannot write itself: a pydantic model (an SDK message an environment passes back)
    as the SDK would send it, its fields that were set."""
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    return dump(exclude_unset=True, mode="json")


async def _read_answer(status_line: bytes, reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes, bool]:
    """Status, headers (lower-case names), body and whether the connection may be reused."""
    version, _, rest = status_line.decode("latin-1").partition(" ")
    status = int(rest.split(" ", 1)[0])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n"):
            break
        if not line:
            raise asyncio.IncompleteReadError(b"", None)
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size = int((await reader.readline()).split(b";", 1)[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return status, headers, b"".join(parts), keep
    length = headers.get("content-length")
    if length is not None:
        return status, headers, await reader.readexactly(int(length)), keep
    return status, headers, await reader.read(), False  # no length: the body runs to the connection's end
