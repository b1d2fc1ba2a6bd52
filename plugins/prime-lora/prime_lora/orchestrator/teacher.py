"""On-policy distillation: a teacher model scores every token the policy sampled.

For each sample the teacher server gets the whole token sequence as a completion prompt with
`prompt_logprobs: 0` (vLLM's extension of /v1/completions): its reply holds, per prompt position, the
log-prob of the token actually there (position 0 has none). Those are the teacher's plain-softmax
log-probs (vLLM applies no temperature or truncation to prompt tokens).

The sample then carries `teacher_logprobs` (0.0 where loss_mask is 0) and, once its group's advantage is
known, `token_advantages` = adv_tau * advantage + teacher_tau * (teacher_lp - inference_lp) on the loss
tokens: inference_lp - teacher_lp is the per-token estimate of the reverse KL to the teacher.

A server refuses a prompt that leaves no room for the one token it must generate: a sequence as long as
the teacher's max_model_len (a truncated rollout on a server of the same length) is sent without its
last token, whose teacher log-prob is then taken equal to the policy's (no distillation signal there).
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass
from typing import Any

import httpx

from prime_cli.train.plugin_api import (
    RLConfig,
    TrainingSample,
    served_model_cards,
    training_weights,
)

TEACHER_ERROR_KIND = "TeacherError"  # the error_rate/<kind> a failed teacher call counts in
TIMEOUT_S = 300.0  # per call: a long sequence on a busy CPU server
RETRIES = 3  # after the first try, on 5xx, timeouts and dropped connections


class TeacherError(Exception):
    """The teacher could not score a sample (after retries): its rollout is an errored rollout."""


@dataclass(frozen=True)
class TeacherEndpoint:
    base_url: str  # ends in /v1
    model: str  # the name the server serves the teacher under
    key_var: str | None = None  # the environment variable holding its API key

    def headers(self) -> dict[str, str]:
        if self.key_var is None:
            return {}
        key = os.environ.get(self.key_var)
        if not key:
            raise TeacherError(f"the teacher's API key variable {self.key_var} is not set (set it in the environment "
                               "or an env_file)")
        return {"Authorization": f"Bearer {key}"}


def teacher_endpoint(teacher: Any, config: RLConfig, run_url: str) -> TeacherEndpoint:
    """A server of its own; else the run's vLLM (the base model when the teacher names the run's model, or
    the adapter it serves as "teacher")."""
    if teacher.client.base_url:
        return TeacherEndpoint(teacher.client.base_url[0], teacher.served_name, teacher.api_key_var)
    if teacher.adapter is None and teacher.served_name == config.model.name:
        return TeacherEndpoint(run_url, training_weights(config.model.name).served_name)
    return TeacherEndpoint(run_url, teacher.served_name)


def prompt_token_logprobs(reply: dict[str, Any], input_ids: list[int]) -> list[float]:
    """The log-prob of each token of input_ids from a /v1/completions reply with prompt_logprobs (0.0 at
    position 0, which has none)."""
    try:
        entries = reply["choices"][0]["prompt_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise TeacherError("the teacher's reply has no prompt_logprobs (is it a vLLM server? it must "
                           "support prompt_logprobs on /v1/completions)") from None
    if not isinstance(entries, list) or len(entries) != len(input_ids):
        raise TeacherError(f"the teacher returned {len(entries) if isinstance(entries, list) else 'no'} prompt "
                           f"log-probs for {len(input_ids)} tokens")
    out = [0.0]
    for position in range(1, len(input_ids)):
        entry = entries[position]
        token = str(input_ids[position])
        if not isinstance(entry, dict) or not isinstance(entry.get(token), dict):
            raise TeacherError(f"the teacher's prompt log-probs lack token {token} at position {position}")
        out.append(float(entry[token]["logprob"]))
    return out


class TeacherClient:
    """Scores samples on one teacher server, at most `max_concurrent` calls at once."""

    def __init__(self, endpoint: TeacherEndpoint, max_concurrent: int = 32, timeout_s: float = TIMEOUT_S,
                 retries: int = RETRIES, backoff_s: float = 0.5):
        self.endpoint, self.retries, self.backoff_s = endpoint, retries, backoff_s
        self.http = httpx.AsyncClient(timeout=timeout_s, headers=endpoint.headers())
        self.limit = asyncio.Semaphore(max_concurrent)
        self._max_model_len: int | None | bool = False  # False: not asked yet

    async def max_model_len(self) -> int | None:
        """The teacher's context length as vLLM lists it in /v1/models (None: not listed). vLLM lists it on
        the base model's entry, not on an adapter's: one server has one context length."""
        if self._max_model_len is False:
            cards = await asyncio.to_thread(served_model_cards, self.endpoint.base_url) or []
            own = [c for c in cards if c.get("id") == self.endpoint.model]
            lengths = [c.get("max_model_len") for c in own + cards if isinstance(c.get("max_model_len"), int)]
            if not cards:  # the listing failed (or needs a key): asked again next time, not remembered as unknown
                return None
            self._max_model_len = lengths[0] if lengths else None
        return self._max_model_len  # type: ignore[return-value]

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoint.base_url.rstrip('/')}/completions"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                async with self.limit:
                    response = await self.http.post(url, json=body)
            except httpx.TransportError as exc:  # timeouts, refused and dropped connections
                if last:
                    raise TeacherError(f"the teacher at {self.endpoint.base_url} did not answer ({type(exc).__name__}: "
                                       f"{exc or 'no message'}) after {self.retries + 1} tries") from None
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        if last:
                            raise TeacherError("the teacher's reply is not JSON") from None
                elif response.status_code < 500 and response.status_code != 429:
                    raise TeacherError(f"the teacher refused the call (HTTP {response.status_code}): "
                                       f"{' '.join(response.text.split())[:300]}")
                elif last:
                    raise TeacherError(f"the teacher failed (HTTP {response.status_code}) {self.retries + 1} times: "
                                       f"{' '.join(response.text.split())[:300]}")
            await asyncio.sleep(self.backoff_s * 2 ** attempt * random.uniform(0.75, 1.25))
        raise AssertionError("unreachable")

    async def token_logprobs(self, input_ids: list[int]) -> tuple[list[float], bool]:
        """(the teacher's log-prob of each token, 0.0 at position 0; whether the last token was left out
        because the sequence fills the teacher's context: its value is then 0.0 too)."""
        limit = await self.max_model_len()
        cut = limit is not None and len(input_ids) >= limit and len(input_ids) > 1
        ids = list(input_ids[:-1]) if cut else list(input_ids)
        reply = await self._post({"model": self.endpoint.model, "prompt": ids, "max_tokens": 1,
                                  "prompt_logprobs": 0, "temperature": 1.0})
        logprobs = prompt_token_logprobs(reply, ids)
        return (logprobs + [0.0], True) if cut else (logprobs, False)

    async def score(self, sample: TrainingSample) -> TrainingSample:
        """The sample with teacher_logprobs (0.0 where loss_mask is 0)."""
        logprobs, cut = await self.token_logprobs(sample["input_ids"])
        mask = sample["loss_mask"]
        teacher = [lp if m else 0.0 for lp, m in zip(logprobs, mask, strict=True)]
        if cut and mask[-1]:  # no teacher value: the policy's own, so the token adds no distillation term
            teacher[-1] = float(sample["inference_logprobs"][-1])
        return {**sample, "teacher_logprobs": teacher}

    async def aclose(self) -> None:
        await self.http.aclose()


def token_advantages(sample: TrainingSample, advantage: float, adv_tau: float, teacher_tau: float) -> list[float]:
    """adv_tau * advantage + teacher_tau * (teacher_lp - inference_lp) on loss tokens, 0.0 elsewhere."""
    return [adv_tau * advantage + teacher_tau * (t - i) if m else 0.0
            for m, t, i in zip(sample["loss_mask"], sample["teacher_logprobs"], sample["inference_logprobs"],
                               strict=True)]


def teacher_kl(samples: list[TrainingSample]) -> float | None:
    """The mean over loss tokens of inference_lp - teacher_lp (the per-token reverse-KL estimate); None
    when no sample was scored by a teacher."""
    total, count = 0.0, 0
    for sample in samples:
        if "teacher_logprobs" not in sample:
            continue
        for m, t, i in zip(sample["loss_mask"], sample["teacher_logprobs"], sample["inference_logprobs"], strict=True):
            if m:
                total += i - t
                count += 1
    return total / count if count else None
