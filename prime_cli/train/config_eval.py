"""[orchestrator.eval]: online evals of the policy while it trains (prime-rl's keys), and their environments."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from .config_nodes import Section


class EvalEnvEntry(Section):
    id: str
    args: dict[str, Any] = Field(default_factory=dict)
    num_examples: int | None = None  # None: [orchestrator.eval] num_examples
    rollouts_per_example: int | None = Field(None, ge=1)  # None: [orchestrator.eval] rollouts_per_example

    @model_validator(mode="after")
    def _examples(self) -> EvalEnvEntry:
        if self.num_examples is not None and (self.num_examples == 0 or self.num_examples < -1):
            raise ValueError(f"orchestrator.eval.env num_examples must be -1 (all) or at least 1 "
                             f"(got {self.num_examples})")
        return self


class OnlineEvalConfig(Section):
    """[orchestrator.eval]: evaluate the policy on these environments during training (prime-rl's keys)."""

    interval: int = Field(100, ge=1)  # every `interval` steps, and at the last step
    num_examples: int = -1  # per environment, from its eval split; -1: all
    rollouts_per_example: int = Field(1, ge=1)
    skip_eval_on_base: bool = False  # true: no eval of the untrained adapter (step 0)
    skip_eval_on_resume: bool = True  # resuming at step K: the eval of step K (done before) is not run again
    env: list[EvalEnvEntry] = Field(default_factory=list)  # none: the training environments

    @model_validator(mode="before")
    @classmethod
    def _eval_base_model(cls, data: Any) -> Any:
        """prime-rl's `eval_base_model = true|false` is the opposite of skip_eval_on_base."""
        if isinstance(data, dict) and "eval_base_model" in data:
            data = dict(data)
            value = data.pop("eval_base_model")
            if not isinstance(value, bool):
                raise ValueError(f"orchestrator.eval.eval_base_model must be true or false (got {value!r})")
            if "skip_eval_on_base" in data and data["skip_eval_on_base"] == value:
                raise ValueError("orchestrator.eval.eval_base_model and skip_eval_on_base contradict each other: "
                                 "keep one of them")
            data["skip_eval_on_base"] = not value
        return data

    @model_validator(mode="after")
    def _examples(self) -> OnlineEvalConfig:
        if self.num_examples == 0 or self.num_examples < -1:
            raise ValueError(f"orchestrator.eval.num_examples must be -1 (all) or at least 1 (got {self.num_examples})")
        return self

    def steps(self, max_steps: int, start: int = 0) -> list[int]:
        """The policy steps evaluated by a run of max_steps steps started (or resumed) at `start`:
        0 unless skip_eval_on_base, every multiple of interval, and max_steps."""
        due = set(range(0, max_steps + 1, self.interval)) | {max_steps}
        if self.skip_eval_on_base:
            due.discard(0)
        first = start + 1 if start and self.skip_eval_on_resume else start
        return sorted(s for s in due if s >= first)
