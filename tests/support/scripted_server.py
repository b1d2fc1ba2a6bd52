"""A real OpenAI-compatible HTTP server with scripted replies and faults, for tests and benchmarks.

    with ScriptedOpenAIServer(faults=["500", "ok"]) as server:
        client = OpenAIChatClient(EndpointSpec("m", "m", server.url, None))

Serves POST /v1/chat/completions, POST /v1/completions and GET /v1/models on 127.0.0.1 (HTTP/1.1,
keep-alive) from a background thread. Like vLLM with runtime LoRA loading, POST /v1/load_lora_adapter
and /v1/unload_lora_adapter add and remove adapters (`server.adapters`: name -> path; the files are not
read), which /v1/models then lists (with `parent`) and chat requests may name; `lora_loads` limits
how many loads succeed (later ones get vLLM's 404 of a server without runtime loading). Every request is recorded in `server.requests` as
{"method", "path", "headers" (lower-case names), "json"}. A generation request with `"stream": true`
gets the same reply as server-sent events (`sse_events`). A completion request whose prompt is token ids
with `prompt_logprobs` gets vLLM's `prompt_logprobs` (None, then per position {"<token id>": {"logprob"...}})
from `prompt_logprob(ids, position)` (default: `scripted_prompt_logprob`). Standalone, for benchmarks:

    python -m tests.support.scripted_server --port 8765 [--fault-rate 0.1 --seed 0 --token-ids]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import re
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = ("ok", "429", "500", "timeout", "drop", "garbage", "slow", "overlong")
RANDOM_FAULT_KINDS = ("429", "500", "drop", "garbage")
Reply = Callable[[dict[str, Any]], "str | dict[str, Any]"]


def token_id(word: str) -> int:
    return zlib.crc32(word.encode("utf-8")) % 50_000


def token_logprob(word: str) -> float:
    return -((zlib.crc32(word.encode("utf-8")) % 1000) + 1) / 1000.0


def content_text(content: Any) -> str:
    """The text of a message content: a string or a list of {"type": "text", "text": ...} parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def default_reply(request: dict[str, Any]) -> str:
    """The last user message (or the prompt) reversed, in <reversed_text> tags (reverse-text scores 1.0)."""
    if "messages" in request:
        users = [m for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        text = content_text(users[-1].get("content")) if users else ""
    else:
        text = str(request.get("prompt") or "")
    return f"<reversed_text>{text[::-1]}</reversed_text>"


def scripted_prompt_logprob(ids: list[int], position: int) -> float:
    """A deterministic log-prob of ids[position] after ids[:position]."""
    return -((ids[position] * 31 + position) % 1000 + 1) / 1000.0


def usage(prompt: list[str], completion: list[str]) -> dict[str, int]:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(completion), "total_tokens": len(prompt) + len(completion)}


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def error_body(message: str, kind: str, code: Any = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def sse_events(response: dict[str, Any], chat: bool, usage_too: bool) -> bytes:
    """A whole response as OpenAI's server-sent chunks: a role chunk, one chunk per word of text, tool
    calls in one chunk, the finish reason, usage when asked for (`stream_options.include_usage`), [DONE].
    Logprobs and token ids are not streamed."""
    head = {k: response[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk" if chat else "text_completion"
    choice = response["choices"][0]

    def chunk(part: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        key = "delta" if chat else "text"
        piece = part if chat else part.get("content", "")
        return {**head, "choices": [{"index": 0, key: piece, "finish_reason": finish, "logprobs": None}]}

    message = choice["message"] if chat else {"content": choice["text"]}
    events = [chunk({"role": "assistant", "content": ""})] if chat else []
    events += [chunk({"content": word}) for word in re.findall(r"\s*\S+\s*", message.get("content") or "")]
    if message.get("tool_calls"):
        events.append(chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]}))
    events.append(chunk({} if chat else {"content": ""}, choice["finish_reason"]))
    if usage_too:
        events.append({**head, "choices": [], "usage": response["usage"]})
    return b"".join(b"data: " + json.dumps(e).encode("utf-8") + b"\n\n" for e in events) + b"data: [DONE]\n\n"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256
    scripted: ScriptedOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or go away are part of the script


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def handle(self) -> None:  # track open connections, so that stop() can close them
        self.server.scripted._track(self.connection, add=True)
        try:
            super().handle()
        finally:
            self.server.scripted._track(self.connection, add=False)

    def do_GET(self) -> None:
        self.server.scripted._handle(self)

    do_POST = do_GET


class ScriptedOpenAIServer:
    """See the module docstring. Faults: a list consumed one per generation request ("ok" = none),
    or `fault_rate` with `fault_kinds` and `seed` (deterministic sequence of random choices), or
    `fault_for(request body)`, checked first: a fault name for that request (e.g. a 500 on every try of
    some prompts), or None to fall through."""

    def __init__(self, reply: Reply | None = None, *, models: Iterable[str] | None = None,
                 api_key: str | None = None, token_ids: bool = False, faults: Iterable[str] | None = None,
                 fault_rate: float = 0.0, fault_kinds: Iterable[str] = RANDOM_FAULT_KINDS, seed: int = 0,
                 retry_after: float | str | None = 0, timeout_delay: float = 2.0, slow_delay: float = 0.2,
                 delay: float = 0.0, host: str = "127.0.0.1", port: int = 0, lora_loads: int | None = None,
                 prompt_logprob: Callable[[list[int], int], float] = scripted_prompt_logprob,
                 fault_for: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        self.reply, self.api_key, self.token_ids = reply or default_reply, api_key, token_ids
        self.prompt_logprob = prompt_logprob
        self.fault_for = fault_for
        self.models = list(models) if models is not None else None
        self.fault_kinds, faults = list(fault_kinds), None if faults is None else list(faults)
        for name in [*(faults or []), *self.fault_kinds]:
            if name not in FAULT_KINDS:
                raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULT_KINDS)}")
        self._faults = None if faults is None else deque(faults)
        self.fault_rate = fault_rate
        self._rng = random.Random(seed)
        self.retry_after, self.timeout_delay, self.slow_delay, self.delay = retry_after, timeout_delay, slow_delay, delay
        self.host, self.port = host, port
        self.lora_loads = lora_loads  # None: every load succeeds
        self.adapters: dict[str, str] = {}
        self.faults_served: list[str] = []  # the fault drawn for each generation request
        self.in_flight = self.max_in_flight = 0
        self._ids = itertools.count(1)
        self._requests: list[dict[str, Any]] = []
        self._lock, self._stopping = threading.Lock(), threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        self._stopping.clear()
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.scripted = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=f"scripted-openai-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            _shutdown(conn)
        if self._thread is not None:
            self._thread.join(timeout=5)

    __enter__ = start

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == path]

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    def _next_fault(self, body: dict[str, Any]) -> str:
        chosen = self.fault_for(body) if self.fault_for is not None else None
        if chosen is not None and chosen not in FAULT_KINDS:
            raise ValueError(f"unknown fault {chosen!r}; known: {', '.join(FAULT_KINDS)}")
        with self._lock:
            if chosen is not None:
                fault = chosen
            elif self._faults is not None:
                fault = self._faults.popleft() if self._faults else "ok"
            elif self.fault_rate > 0 and self._rng.random() < self.fault_rate:
                fault = self._rng.choice(self.fault_kinds)
            else:
                fault = "ok"
            self.faults_served.append(fault)
            return fault

    def _send(self, h: _Handler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            h.send_response(status)
            h.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                h.send_header(name, value)
            h.end_headers()
            h.wfile.write(data)
        except OSError:
            h.close_connection = True

    def _handle(self, h: _Handler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path, method = h.path.split("?", 1)[0], h.command
        with self._lock:
            self._requests.append({"method": method, "path": path, "json": body,
                                   "headers": {k.lower(): v for k, v in h.headers.items()}})
        if method == "GET":
            if path == "/v1/models":
                bases = self.models or ["scripted-model"]
                with self._lock:
                    adapters = [{"id": name, "object": "model", "created": 0, "owned_by": "scripted", "root": root,
                                 "parent": bases[0]} for name, root in self.adapters.items()]
                return self._send(h, 200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in bases] + adapters})
            return self._send(h, 404, error_body(f"no route GET {path}", "not_found"))
        if path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
            return self._adapter_route(h, path, body if isinstance(body, dict) else {})
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._send(h, 404, error_body(f"no route POST {path}", "not_found"))
        if not isinstance(body, dict):
            return self._send(h, 400, error_body("request body is not a JSON object", "invalid_request_error"))
        if self.api_key is not None:
            given = h.headers.get("Authorization", "").removeprefix("Bearer ")
            if given != self.api_key:  # echoes the key, as careless proxies do: clients must redact it
                return self._send(h, 401, error_body(f"Incorrect API key provided: {given}.",
                                                     "invalid_request_error", "invalid_api_key"))
        model = body.get("model")
        if self.models is not None and model not in self.models and model not in self.adapters:
            return self._send(h, 404, error_body(f"The model `{model}` does not exist or you do not have access to it.",
                                                 "invalid_request_error", "model_not_found", "model"))
        fault = self._next_fault(body)
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(h, path, body, fault)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _adapter_route(self, h: _Handler, path: str, body: dict[str, Any]) -> None:
        name = body.get("lora_name")
        with self._lock:
            if path.endswith("/unload_lora_adapter"):
                if self.adapters.pop(name, None) is None:
                    return self._send(h, 404, error_body(f"The lora adapter '{name}' cannot be found.",
                                                         "NotFoundError", 404))
                return self._send(h, 200, b"Success")
            if self.lora_loads is not None and self.lora_loads <= 0:
                return self._send(h, 404, {"detail": "Not Found"})
            if name in self.adapters and not body.get("load_inplace"):
                return self._send(h, 400, error_body(f"The lora adapter '{name}' has already been loaded.",
                                                     "InvalidUserInput", 400))
            if self.lora_loads is not None:
                self.lora_loads -= 1
            self.adapters[str(name)] = str(body.get("lora_path"))
        return self._send(h, 200, b"Success")

    def _answer(self, h: _Handler, path: str, body: dict[str, Any], fault: str) -> None:
        if fault == "429":
            headers = {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}
            return self._send(h, 429, error_body("Rate limit reached (scripted).", "requests", "rate_limit_exceeded"), headers)
        if fault == "500":
            return self._send(h, 500, error_body("Internal server error (scripted).", "server_error"))
        if fault == "overlong":
            return self._send(h, 400, error_body(
                "This model's maximum context length is 2048 tokens. However, you requested 4096 tokens "
                "in the messages. Please reduce the length of the messages.", "BadRequestError", 400))
        if fault == "drop":
            h.close_connection = True
            return _shutdown(h.connection)
        if fault == "garbage":
            return self._send(h, 200, b'{"id": "chatcmpl-garbage", "choices": [{"index": 0, "mess')
        wait = {"timeout": self.timeout_delay, "slow": self.slow_delay}.get(fault, 0.0) + self.delay
        if wait and self._stopping.wait(wait):
            h.close_connection = True
            return None
        chat = path.endswith("/chat/completions")
        response = self._chat_body(body) if chat else self._completion_body(body)
        if body.get("stream") is True:
            options = body.get("stream_options")
            usage_too = isinstance(options, dict) and options.get("include_usage") is True
            return self._send(h, 200, sse_events(response, chat, usage_too), {"Content-Type": "text/event-stream"})
        return self._send(h, 200, response)

    def _generate(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str], str]:
        reply = self.reply(body)
        message: dict[str, Any] = {"role": "assistant", "content": reply} if isinstance(reply, str) \
            else {"role": "assistant", "content": None, **reply}
        calls = message.get("tool_calls")
        if calls:
            message["tool_calls"] = [{
                "id": call.get("id") or f"call_{i}", "type": "function",
                "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]
                             if isinstance(call["function"]["arguments"], str) else json.dumps(call["function"]["arguments"])},
            } for i, call in enumerate(calls)]
        completion = (message.get("content") or "").split()
        finish = "tool_calls" if calls else "stop"
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(limit, int) and not calls and len(completion) > limit:
            completion, finish = completion[:limit], "length"
            message["content"] = " ".join(completion)
        if "messages" in body:
            prompt = [w for m in body["messages"] if isinstance(m, dict) for w in content_text(m.get("content")).split()]
        else:
            prompt = str(body.get("prompt") or "").split()
        return message, prompt, completion, finish

    def _chat_body(self, body: dict[str, Any]) -> dict[str, Any]:
        message, prompt, completion, finish = self._generate(body)
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": w, "logprob": token_logprob(w), "bytes": list(w.encode()),
                                               "top_logprobs": []} for w in completion]}
        response = {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"), "choices": [choice], "usage": usage(prompt, completion)}
        if self.token_ids:
            response["prompt_token_ids"] = [token_id(w) for w in prompt]
            choice["token_ids"] = [token_id(w) for w in completion]
        return response

    def _completion_body(self, body: dict[str, Any]) -> dict[str, Any]:
        message, prompt, completion, finish = self._generate(body)
        choice: dict[str, Any] = {"index": 0, "text": message.get("content") or "", "finish_reason": finish,
                                  "logprobs": None}
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": completion, "token_logprobs": [token_logprob(w) for w in completion],
                                  "top_logprobs": None, "text_offset": None}
        if self.token_ids:
            choice["prompt_token_ids"] = [token_id(w) for w in prompt]
            choice["token_ids"] = [token_id(w) for w in completion]
        ids = body.get("prompt")
        if body.get("prompt_logprobs") is not None and isinstance(ids, list) and all(isinstance(t, int) for t in ids):
            choice["prompt_logprobs"] = [None] + [
                {str(ids[i]): {"logprob": self.prompt_logprob(ids, i), "rank": 1, "decoded_token": ""}}
                for i in range(1, len(ids))]
        return {"id": f"cmpl-{next(self._ids)}", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model"), "choices": [choice], "usage": usage(prompt, completion)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server (tests and benchmarks).")
    for flag, kind, default in [("--host", str, "127.0.0.1"), ("--port", int, 8765), ("--models", str, None),
                                ("--api-key", str, None), ("--fault-rate", float, 0.0), ("--seed", int, 0),
                                ("--fault-kinds", str, ",".join(RANDOM_FAULT_KINDS)), ("--delay", float, 0.0),
                                ("--lora-loads", int, None)]:
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--token-ids", action="store_true")
    args = parser.parse_args(argv)
    server = ScriptedOpenAIServer(models=args.models.split(",") if args.models else None, api_key=args.api_key,
                                  token_ids=args.token_ids, fault_rate=args.fault_rate,
                                  fault_kinds=args.fault_kinds.split(","), seed=args.seed, delay=args.delay,
                                  host=args.host, port=args.port, lora_loads=args.lora_loads)
    with server, contextlib.suppress(KeyboardInterrupt):
        print(f"serving on {server.url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
