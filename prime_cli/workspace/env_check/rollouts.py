"""Scripted rollouts: every reply kind goes through the environment's own `rollout` (so multi-turn and
tool environments run their turn loop) and each row's replies are scored together as one group by
`env.score_group`, the path `prime eval run` scores with. No model is called."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prime_cli.envs.errors import ModelError
from prime_cli.envs.rubrics import JudgeRubric, Rubric, RubricGroup
from prime_cli.envs.types import ChatResponse, State
from prime_cli.runs.tasks import gather_or_cancel

MAX_SCRIPTED_TURNS = 10  # for an environment without max_turns: repeating one reply must end it by then
LONGEST_SCRIPTED_GAME = 200  # an environment's own max_turns is honoured up to this many turns


def scripted_turn_limit(env: Any) -> int:
    """How many scripted turns a rollout may take: the environment's own max_turns (the largest of an
    EnvGroup's children) when it sets one, else MAX_SCRIPTED_TURNS."""
    children = getattr(env, "env_map", None)
    envs = list(children.values()) if isinstance(children, dict) else [env]
    longest = max((getattr(e, "max_turns", -1) or -1 for e in envs), default=-1)
    return min(max(MAX_SCRIPTED_TURNS, longest), LONGEST_SCRIPTED_GAME)


class JudgeNotCalled(Exception):
    """Raised by the stand-in judge: `prime env check` does not call judge models (yet)."""


class SkippedJudge:
    async def chat(self, messages: Any, *, model: str, tools: Any = None, sampling_args: Any = None) -> ChatResponse:
        raise JudgeNotCalled("prime env check does not call judge models")


class ScriptedReplies:
    """A chat client that gives the same reply at every turn, for at most MAX_SCRIPTED_TURNS turns."""

    def __init__(self, reply: str, limit: int = MAX_SCRIPTED_TURNS) -> None:
        self.reply = reply
        self.limit = limit
        self.calls = 0

    async def chat(self, messages: Any, *, model: str, tools: Any = None, sampling_args: Any = None) -> ChatResponse:
        self.calls += 1
        if self.calls > self.limit:
            raise ModelError(f"the rollout did not end after {self.limit} scripted turns of the same reply "
                             "(set max_turns if a game can go on longer)")
        return ChatResponse(message={"role": "assistant", "content": self.reply}, finish_reason="stop")

    async def complete(self, prompt: str, *, model: str, sampling_args: Any = None) -> ChatResponse:
        return await self.chat(prompt, model=model)


@dataclass
class ScoredRow:
    example_id: Any
    answer_chars: int = 0
    states: dict[str, State] = field(default_factory=dict)  # kind -> scored rollout
    task: str = ""  # the row's task (an EnvGroup's child)


def judge_rubrics(rubric: Rubric) -> list[JudgeRubric]:
    if isinstance(rubric, JudgeRubric):
        return [rubric]
    children = list(rubric.rubrics) if isinstance(rubric, RubricGroup) else []
    env_map = getattr(rubric, "env_map", None)  # an EnvGroup's rubric: one environment per task
    if isinstance(env_map, dict):
        children = [env.rubric for env in env_map.values()]
    return [j for child in children for j in judge_rubrics(child)]


def skip_judges(rubric: Rubric) -> list[JudgeRubric]:
    """Point every judge rubric at a stand-in that refuses; its functions then score 0.0 with a
    recorded JudgeNotCalled, which the report shows as skipped."""
    judges = judge_rubrics(rubric)
    for judge in judges:
        judge.judge_client = SkippedJudge()
        judge.class_objects["judge_client"] = judge.judge_client
    return judges


async def score_rows(env: Any, rows: list[dict[str, Any]], replies: list[dict[str, str | None]]) -> list[ScoredRow]:
    async def one_row(row: dict[str, Any], kinds: dict[str, str | None]) -> ScoredRow:
        chosen = [(kind, text) for kind, text in kinds.items() if text is not None]
        limit = scripted_turn_limit(env)
        states = await gather_or_cancel(*(env.rollout(ScriptedReplies(text, limit), "scripted", row)
                                          for _, text in chosen))
        await env.score_group(list(states))
        answer = str(row.get("answer") or "").strip()
        return ScoredRow(row.get("example_id"), len(answer), {kind: state for (kind, _), state in zip(chosen, states, strict=True)},
                         str(row.get("task") or ""))

    return await gather_or_cancel(*(one_row(row, kinds) for row, kinds in zip(rows, replies, strict=True)))


async def best_paid(env: Any, rows: list[dict[str, Any]], writers: list[Any]) -> Any:
    """The writer whose references the rubric pays most on `rows` (ties: the first). A plain parser gives no
    writing of its own, and a reward that reads a tag the prompt names pays the answer written as is nothing:
    the sound reference is the writing the reward was written for."""
    answers = [str(row.get("answer") or "") for row in rows]
    replies = [{w.how: w.write(a) for w in writers} if a.strip() else {} for a in answers]
    scored = await score_rows(env, rows, replies)
    def paid(how: str) -> float:
        values = [float(r.states[how].get("reward") or 0.0) for r in scored if how in r.states]
        return sum(values) / len(values) if values else 0.0
    return max(writers, key=lambda w: (paid(w.how), -writers.index(w)))
