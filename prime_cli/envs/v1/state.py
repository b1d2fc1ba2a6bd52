"""`State` of verifiers' v1 API: a rollout's mutable scratch space that tasks and toolsets share (subclass
it with fields; each rollout gets its own)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class State(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    artifacts: dict[str, bytes | None] = Field(default_factory=dict)
