"""The inference servers a run samples from: one vLLM the launcher started, or the list in
`orchestrator.client.base_url` (servers on other nodes, each started with `prime train CONFIG --part inference`).

A group of rollouts runs on one server (its rollouts share the prompt's prefix cache, and a multi-turn
rollout keeps its own), the live server with the fewest groups in flight. A server that stops answering
is dropped with one line and its groups are sampled again on the others; when none is left the run stops.
Each new adapter is loaded into every live server before any group samples from it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prime_cli.train.plugin_api import served_models

from ..progress import SERVER_NOTICE

T = TypeVar("T")


class NoServerLeft(Exception):
    """Every inference server failed: nothing later can succeed."""


class ServerDown(Exception):
    """The server a group ran on stopped answering (raised by the caller's check, retried elsewhere)."""


@dataclass
class InferenceServerHandle:
    url: str
    client: Any  # the chat client the rollouts use
    eval_client: Any = None  # online evals: no token ids
    in_flight: int = 0
    alive: bool = True
    groups: int = 0  # groups sampled here (shown in the log when a server is dropped)
    failure: str = ""


@dataclass
class InferencePool:
    servers: list[InferenceServerHandle]
    is_up: Callable[[str], bool] = field(default=lambda url: served_models(url, timeout=5.0) is not None)

    @classmethod
    def single(cls, url: str, client: Any = None) -> InferencePool:
        """One server: a run's own vLLM, or a bare client or URL handed to a part of the orchestrator (tests)."""
        return cls([InferenceServerHandle(url, client)])

    @property
    def live(self) -> list[InferenceServerHandle]:
        return [s for s in self.servers if s.alive]

    @property
    def primary(self) -> InferenceServerHandle:
        """The server online evals and single requests go to: the first live one."""
        live = self.live
        if not live:
            raise NoServerLeft(self.everything_failed())
        return live[0]

    def pick(self) -> InferenceServerHandle:
        live = self.live
        if not live:
            raise NoServerLeft(self.everything_failed())
        return min(live, key=lambda s: (s.in_flight, self.servers.index(s)))

    def drop(self, server: InferenceServerHandle, reason: str) -> None:
        if not server.alive:
            return
        server.alive, server.failure = False, reason
        others = len(self.live)
        where = (f"its groups go to the {others} other server{'s' if others != 1 else ''}" if others
                 else "no server is left")
        print(f"{SERVER_NOTICE}{server.url} failed ({reason}); {where}", file=sys.stderr, flush=True)

    def everything_failed(self) -> str:
        causes = "; ".join(f"{s.url}: {s.failure}" for s in self.servers)
        return f"every inference server failed ({causes})"

    async def run_group(self, sample: Callable[[InferenceServerHandle], Awaitable[T]],
                        failed_here: Callable[[T], bool]) -> T:
        """`sample(server)` on the least busy live server; when `failed_here(result)` (the group hit endpoint
        errors) and the server no longer answers, it is dropped and the group sampled again elsewhere."""
        if len(self.servers) == 1:  # nowhere to go: the group's errors count as they are
            return await sample(self.servers[0])
        while True:
            server = self.pick()
            server.in_flight += 1
            try:
                result = await sample(server)
            except ServerDown as exc:
                result, down = None, str(exc) or "it stopped answering"
            else:
                down = None
                if failed_here(result) and not await asyncio.to_thread(self.is_up, server.url):
                    down = "it stopped answering"
            finally:
                server.in_flight -= 1
            if down is None:
                server.groups += 1
                return result  # type: ignore[return-value]
            self.drop(server, down)

    async def for_each_live(self, action: Callable[[InferenceServerHandle], Awaitable[None]],
                            unreachable: type[Exception], strict: bool) -> None:
        """`action` on every live server at once. With `strict` (the run's first adapter load: every server must
        see output_dir) any failure raises; later, a server that raises `unreachable` is dropped."""
        live = self.live
        results = await asyncio.gather(*(action(s) for s in live), return_exceptions=True)
        for server, result in zip(live, results, strict=True):
            if not isinstance(result, BaseException):
                continue
            if strict or not isinstance(result, unreachable) or len(self.servers) == 1 or \
                    await asyncio.to_thread(self.is_up, server.url):
                raise result
            self.drop(server, str(result))
        if not self.live:
            raise NoServerLeft(self.everything_failed())

    async def aclose(self) -> None:
        for server in self.servers:
            for client in (server.client, server.eval_client):
                if client is not None:
                    await client.aclose()
