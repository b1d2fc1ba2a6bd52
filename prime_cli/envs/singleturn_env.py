"""`SingleTurnEnv`: one model reply per rollout."""

from __future__ import annotations

from typing import Any

from .decorators import stop
from .multiturn_env import MultiTurnEnv
from .types import Messages, State


class SingleTurnEnv(MultiTurnEnv):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("max_turns", None)
        super().__init__(max_turns=1, **kwargs)

    @stop(priority=50)
    async def single_turn_done(self, state: State) -> bool:
        return state["turn"] >= 1

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        return []
