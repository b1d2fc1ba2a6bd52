"""A one-call chat harness that runs inside vf-eval's process: the fair verifiers 0.4.0 peer.

    vf-eval vf1-reverse-text ... --env.agent.harness.id vf1-inproc-chat --env.agent.runtime.type subprocess

verifiers 0.4.0's `null` harness starts one Python program per rollout (`uv sync --script` once per
vf-eval start, then over a second of CPU per rollout importing openai, mcp and httpx). The contract of
`Harness.launch` allows the loop to run in-process as long as every model call goes through the
rollout's interception endpoint and secret; this harness does exactly that: one non-streaming chat
request on a shared HTTP client, then a synthetic successful ProgramResult. The interception server
records the turn on the trace as usual.
"""

from __future__ import annotations

import asyncio

import httpx
import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult

_clients: dict[int, httpx.AsyncClient] = {}  # one keep-alive pool per event loop


def client() -> httpx.AsyncClient:
    loop = id(asyncio.get_running_loop())
    if loop not in _clients:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        _clients[loop] = httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits)
    return _clients[loop]


class InProcessChatConfig(vf.HarnessConfig):
    pass


class InProcessChatHarness(vf.Harness[InProcessChatConfig]):
    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: vf.ModelContext, trace: vf.Trace, runtime: vf.Runtime, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: vf.TaskData) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [m.model_dump(exclude_none=True) for m in prompt or []]
        response = await client().post(f"{endpoint.rstrip('/')}/chat/completions",
                                       headers={"Authorization": f"Bearer {secret}"},
                                       json={"model": ctx.model, "messages": messages})
        if response.status_code != 200:
            return ProgramResult(exit_code=1, stdout="", stderr=f"HTTP {response.status_code}: {response.text[:2000]}")
        return ProgramResult(exit_code=0, stdout="", stderr="")


__all__ = ["InProcessChatHarness"]
