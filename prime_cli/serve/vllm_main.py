"""`python -m prime_cli.serve.vllm_main ARGS`: vLLM's OpenAI server with prime's CPU LoRA fast path.

The patch runs at import (not under `__main__`) so that vLLM's engine process, which re-imports
this module when it is spawned, gets it too.
"""

from __future__ import annotations

import os
import runpy
import sys

if os.environ.get("PRIME_VLLM_FAST_LORA", "1") != "0":
    from prime_cli.serve.cpu_lora_ops import install

    install()

if __name__ == "__main__":
    sys.argv[0] = "vllm.entrypoints.openai.api_server"
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)
