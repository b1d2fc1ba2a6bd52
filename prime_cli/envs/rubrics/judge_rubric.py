"""JudgeRubric: reward functions that ask a judge model whether a response is right.

Reward functions get the bound `judge` method by asking for a parameter named `judge`:

    async def correct(judge, prompt, completion, answer, state) -> float:
        return 1.0 if "yes" in (await judge(prompt, completion, answer, state)).lower() else 0.0

Replies are cached in `state["judge_response"]` (keyed by the formatted judge prompt), and
concurrent identical calls for the same rollout share one request. The tokens each request used are
added up in `state["judge_usage"]` ({judge model: {prompt_tokens, completion_tokens, calls}}), saved
with the rollout so that the judge's cost can be computed.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from prime_cli.envs.errors import RubricError
from prime_cli.envs.messages import content_text, last_assistant_text, last_user_text
from prime_cli.envs.parsers import Parser
from prime_cli.envs.types import Messages, SamplingArgs, State

from .rubric import Rubric

DEFAULT_JUDGE_PROMPT = """\
You are grading an answer to a question against a reference answer.

Question:
{question}

Reference answer:
{answer}

Response to grade:
{response}

Does the response give the same final answer as the reference answer? Differences in wording, \
formatting or level of detail do not matter; a different, missing or hedged final answer does.
Reply with a single word: "yes" or "no"."""


class JudgeRubric(Rubric):
    def __init__(
        self,
        judge_client: Any = None,
        judge_model: str = "gpt-4.1-nano",
        judge_prompt: str = DEFAULT_JUDGE_PROMPT,
        judge_sampling_args: SamplingArgs | None = None,
        parser: Parser | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            judge_prompt.format(question="", answer="", response="")
        except (KeyError, IndexError, ValueError) as exc:
            raise RubricError(
                f"judge_prompt must use only the placeholders {{question}}, {{answer}} and "
                f"{{response}} (write literal braces as {{{{ and }}}}): {type(exc).__name__}: {exc}"
            ) from exc
        self.judge_client = judge_client
        self.judge_model = judge_model
        self.judge_prompt = judge_prompt
        self.judge_sampling_args: SamplingArgs = dict(judge_sampling_args or {})
        self._inflight: dict[tuple[int, str], asyncio.Future[str]] = {}
        super().__init__(parser=parser, **kwargs)
        self.class_objects.update(
            judge=self.judge,
            judge_client=judge_client,
            judge_model=judge_model,
            judge_prompt=judge_prompt,
        )

    def format_judge_prompt(self, prompt: Messages, completion: Messages, answer: str) -> str:
        response = self.parser.parse_answer(completion)
        if response is None:
            response = last_assistant_text(completion) or ""
        return self.judge_prompt.format(
            question=last_user_text(prompt), answer=answer, response=response
        )

    async def judge(
        self, prompt: Messages, completion: Messages, answer: str, state: State | None = None
    ) -> str:
        """The judge model's reply text for this rollout (cached in `state["judge_response"]`)."""
        judge_prompt = self.format_judge_prompt(prompt, completion, answer)
        if state is None:
            return (await self._request(judge_prompt))[0]
        cache = state.get("judge_response")
        if not isinstance(cache, dict):
            cache = state["judge_response"] = {}
        if judge_prompt in cache:
            return cache[judge_prompt]
        # id(state) is unique while the state is alive, and it is alive while the call is in flight.
        key = (id(state), judge_prompt)
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            reply, usage = await self._request(judge_prompt)
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters get it, nobody else needs to
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._inflight[key]
        future.set_result(reply)
        cache[judge_prompt] = reply
        self._record_usage(state, usage)
        return reply

    def _record_usage(self, state: State, usage: Any) -> None:
        tallies = state.get("judge_usage")
        if not isinstance(tallies, dict):
            tallies = state["judge_usage"] = {}
        tally = tallies.setdefault(self.judge_model, {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0})
        tally["calls"] += 1
        for key in ("prompt_tokens", "completion_tokens"):
            value = getattr(usage, key, None) if usage is not None else None
            if isinstance(value, int) and not isinstance(value, bool):
                tally[key] += value

    async def _request(self, judge_prompt: str) -> tuple[str, Any]:
        """The reply text and its token usage (an object with prompt_tokens/completion_tokens, or None)."""
        client = self._client()
        messages = [{"role": "user", "content": judge_prompt}]
        chat = getattr(client, "chat", None)
        if inspect.iscoroutinefunction(chat):
            response = await chat(
                messages, model=self.judge_model, sampling_args=dict(self.judge_sampling_args)
            )
            return content_text(response.message), response.usage
        if chat is not None and hasattr(chat, "completions"):
            result = chat.completions.create(
                model=self.judge_model, messages=messages, **self.judge_sampling_args
            )
            if inspect.isawaitable(result):  # AsyncOpenAI; a sync OpenAI client returns directly
                result = await result
            return result.choices[0].message.content or "", getattr(result, "usage", None)
        raise RubricError(
            f"judge_client {type(client).__name__} is neither a ChatClient (async chat(messages, "
            f"*, model, ...)) nor an OpenAI-style client (chat.completions.create)"
        )

    def _client(self) -> Any:
        if self.judge_client is None:
            try:
                import openai  # lazy: heavy
            except ImportError as exc:
                raise RubricError(
                    "JudgeRubric has no judge_client and the openai package is not installed; "
                    "pass judge_client=... or install openai"
                ) from exc
            self.judge_client = openai.AsyncOpenAI()
            self.class_objects["judge_client"] = self.judge_client
        return self.judge_client
