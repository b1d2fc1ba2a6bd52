"""Runs last: Ctrl-C of `prime serve` stops vLLM and everything it spawned."""

from __future__ import annotations

import time

from prime_cli.serve.server import served_models

from .conftest import group_alive


def test_ctrl_c_of_prime_serve_leaves_no_process_behind(local_server):
    record = local_server.record()
    vllm_pid = record["pid"]
    assert group_alive(vllm_pid)
    assert local_server.interrupt() == 0
    deadline = time.monotonic() + 20
    while group_alive(vllm_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not group_alive(vllm_pid), "vLLM or one of its children survived Ctrl-C"
    assert served_models(local_server.url, timeout=1) is None
    assert not (local_server.cache / "servers" / f"{local_server.port}.json").exists()
