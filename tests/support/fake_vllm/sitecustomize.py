"""Imported by every Python process of a test's `prime train` (this folder is on its PYTHONPATH).

With PRIME_TEST_FAKE_VLLM=1 the inference server a training run starts is the scripted
OpenAI-compatible server (tests/support/scripted_server.py: real HTTP on loopback, token ids and
logprobs, runtime LoRA loading) instead of vLLM, so the installed `prime` script, the launcher, the
orchestrator and the trainer all run for real in seconds. PRIME_TEST_FAKE_VLLM_ARGS adds flags to the
scripted server (e.g. `--fault-rate 0.2`). Without the variable this file does nothing.
"""

import os

if os.environ.get("PRIME_TEST_FAKE_VLLM") == "1":
    import sys

    from prime_cli.serve import server

    def _scripted_launch_spec(self):
        flags = ["--port", str(self.options.port), "--token-ids", *os.environ.get("PRIME_TEST_FAKE_VLLM_ARGS", "").split()]
        return [sys.executable, "-m", "tests.support.scripted_server", *flags], dict(os.environ)

    server.VllmServer.launch_spec = _scripted_launch_spec
