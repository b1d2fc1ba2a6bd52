"""Adapter hot-load: the prefix cache is reset after each load (retried while vLLM refuses)."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prime_lora.orchestrator.weights import PolicyWeights


def serve(replies: list[bool] | None):
    calls: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(self.path)
            if self.path == "/reset_prefix_cache" and replies is None:
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"success": replies.pop(0)} if self.path == "/reset_prefix_cache" else {}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, calls


def test_each_load_is_followed_by_a_prefix_cache_reset(tmp_path):
    (tmp_path / "weights" / "step_0").mkdir(parents=True)
    server, calls = serve([False, True, True])  # refused once (requests running), then done
    try:
        weights = PolicyWeights(tmp_path, f"http://127.0.0.1:{server.server_port}/v1", "policy")
        asyncio.run(weights.ensure(0))
        (tmp_path / "weights" / "step_1").mkdir()
        asyncio.run(weights.ensure(1))
    finally:
        server.shutdown()
    assert calls == ["/v1/load_lora_adapter", "/reset_prefix_cache", "/reset_prefix_cache",
                     "/v1/load_lora_adapter", "/reset_prefix_cache"]
    assert weights.loaded == 1


def test_a_server_without_the_endpoint_gets_one_warning(tmp_path, capsys):
    (tmp_path / "weights" / "step_0").mkdir(parents=True)
    server, calls = serve(None)
    try:
        weights = PolicyWeights(tmp_path, f"http://127.0.0.1:{server.server_port}/v1", "policy")
        asyncio.run(weights.ensure(0))
        (tmp_path / "weights" / "step_1").mkdir()
        asyncio.run(weights.ensure(1))
    finally:
        server.shutdown()
    assert calls.count("/v1/load_lora_adapter") == 2
    assert capsys.readouterr().err.count("/reset_prefix_cache") == 1
