"""GEPA fits its reflection prompt to the reflection model's context (issue 54, item 4).

`prime gepa run wordle -m local` failed after minutes: SmolLM2 takes 4096 tokens and every reflection
prompt (long multi-turn transcripts) was longer, refused by vLLM three times, then `GEPA failed`. A
scripted vLLM-like server here reports a small `max_model_len` on /v1/models (or does not) and refuses
a prompt over it with vLLM's own message; the student's replies are long, as wordle's are.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tests.evals.cli_support import run_prime
from tests.gepa import support
from tests.support.scripted_server import ScriptedOpenAIServer, content_text, error_body

TALKY_ENV = '''
import prime_cli.envs as vf

KINDS = ["alpha", "beta", "gamma", "delta", "eps"]


def load_environment(system_prompt: str = "Answer the question."):
    def rows(n, offset):
        return [{"question": f"kind:{KINDS[(i * 7 + offset) % 5]} item {i}", "answer": KINDS[(i * 7 + offset) % 5]}
                for i in range(n)]

    def last_word(completion, answer) -> float:
        words = completion[-1]["content"].split() if completion else []
        return 1.0 if words and words[-1] == answer else 0.0

    return vf.SingleTurnEnv(dataset=rows(40, 0), eval_dataset=rows(40, 3), system_prompt=system_prompt,
                            rubric=vf.Rubric(funcs=[last_word]))
'''
RAMBLE = " ".join(f"thinking step {i} about the question before answering it;" for i in range(60))  # ~3.4k chars
VLLM_TOO_LONG = ("This model's maximum context length is {limit} tokens. However, your prompt contains at least "
                 "{count} input tokens, which exceeds this limit even without any output tokens. Please reduce "
                 "the length of the input prompt.")


def talky_reply(body: dict[str, Any]) -> str:
    messages = body["messages"]
    if body["model"] == "reflector":
        return support.reflector_reply(messages, None, None)
    answer = support.student_reply(messages, None, None)
    return f"{RAMBLE} {answer}"


class SmallContextServer(ScriptedOpenAIServer):
    """vLLM with a short context: /v1/models reports `max_model_len` (unless `report` is False), and a
    chat request whose prompt (its tokens counted as `chars_per_token` characters each, plus the chat
    template's) and max_tokens pass it is refused with vLLM's 400."""

    def __init__(self, *args: Any, max_model_len: int, report: bool = True, chars_per_token: float = 3.5,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_model_len, self.report, self.chars_per_token = max_model_len, report, chars_per_token
        self.refused = 0

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        text = "".join(content_text(m.get("content")) for m in body.get("messages") or [])
        return math.ceil(len(text) / self.chars_per_token) + 8 * len(body.get("messages") or [])

    def _handle(self, h: Any) -> None:
        if h.command == "GET" and h.path.split("?", 1)[0] == "/v1/models":
            card: dict[str, Any] = {"id": "reflector", "object": "model", "created": 0, "owned_by": "vllm",
                                    "root": "/nonexistent/reflector"}
            if self.report:
                card["max_model_len"] = self.max_model_len
            student = {**card, "id": "student"}
            return self._send(h, 200, {"object": "list", "data": [card, student]})
        return super()._handle(h)

    def _answer(self, h: Any, path: str, body: dict[str, Any], fault: str) -> None:
        tokens = self.prompt_tokens(body)
        if tokens + int(body.get("max_tokens") or 0) > self.max_model_len:
            self.refused += 1
            count = min(tokens, self.max_model_len + 1)
            qualifier = "at least " if count == self.max_model_len + 1 else ""
            message = VLLM_TOO_LONG.format(limit=self.max_model_len, count=count).replace("at least ", qualifier)
            return self._send(h, 400, error_body(message, "BadRequestError", 400, "input_tokens"))
        return super()._answer(h, path, body, fault)


def write_talky_env(root) -> None:
    folder = root / "environments" / "talky_gepa"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "talky_gepa.py").write_text(TALKY_ENV)


def gepa(tmp_path, server, *extra: str):
    write_talky_env(tmp_path)
    return run_prime(["gepa", "run", "talky-gepa", "-m", "student", "-M", "reflector", "-b", server.url,
                      "-n", "12", "-N", "4", "--plain", "--reflection-sampling-args", '{"max_tokens": 300}',
                      "-o", str(tmp_path / "run"), *extra], tmp_path)


def reflection_calls(server) -> list[dict[str, Any]]:
    return [r["json"] for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "reflector"]


def test_reflection_prompts_are_shortened_to_fit_the_context_the_server_reports(tmp_path):
    # the full prompt (3 rollouts of ~3.4k characters, then rows only shown) is over 2048 tokens; shortened,
    # each fits beside max_tokens, and keeps the prompt, the inputs, the rewards and the answers
    with SmallContextServer(talky_reply, max_model_len=2048) as server:
        result = gepa(tmp_path, server, "-B", "40")
        calls = reflection_calls(server)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert server.refused == 0 and calls
    for call in calls:
        text = call["messages"][-1]["content"]
        assert server.prompt_tokens(call) + 300 <= 2048
        assert "### Reward:" in text and "### Expected answer" in text and "kind:" in text
        assert "chars cut" in text  # the long transcripts were cut, and say so
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["best_score"] > meta["seed_val_score"]


def test_a_server_that_does_not_report_its_context_teaches_it_with_its_refusal(tmp_path):
    # no max_model_len on /v1/models, and a tokenizer denser than any estimate: the first refusal names the
    # limit and the count, and the reflection is shortened and sent again instead of failing the run
    with SmallContextServer(talky_reply, max_model_len=2048, report=False, chars_per_token=2.0) as server:
        result = gepa(tmp_path, server, "-B", "40")
        calls = reflection_calls(server)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert 1 <= server.refused < len(calls)
    assert "GEPA failed" not in result.stdout
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["best_score"] > meta["seed_val_score"]


def test_a_context_too_short_for_even_the_shortest_prompt_is_refused_before_the_seed_is_scored(tmp_path):
    with SmallContextServer(talky_reply, max_model_len=1024) as server:
        result = gepa(tmp_path, server, "-B", "200", "--minibatch-size", "12")
        student = [r for r in server.requests_to("/v1/chat/completions") if r["json"]["model"] == "student"]
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "1024 tokens" in lines[0] and "-M" in lines[0] and "--minibatch-size" in lines[0]
    assert not student and not (tmp_path / "run").exists()  # nothing ran, nothing was written


def test_a_registry_context_length_is_used_where_the_server_says_nothing(tmp_path):
    with SmallContextServer(talky_reply, max_model_len=1024, report=False) as server:
        (tmp_path / "configs").mkdir()
        (tmp_path / "configs" / "endpoints.toml").write_text(
            f'[[endpoint]]\nendpoint_id = "reflector"\nmodel = "reflector"\nurl = "{server.url}"\n'
            'context_length = 1024\n')
        write_talky_env(tmp_path)
        result = run_prime(["gepa", "run", "talky-gepa", "-m", "student", "-M", "reflector", "-b", server.url,
                            "-n", "12", "-N", "4", "--plain", "--minibatch-size", "12", "-B", "200",
                            "--reflection-sampling-args", '{"max_tokens": 300}'], tmp_path)
    assert result.returncode == 2 and "1024 tokens" in result.stderr, result.stderr[-2000:]


def test_the_embedded_reflection_model_is_refused_before_its_server_is_started(tmp_path):
    # no server runs (an empty cache): the one this run would start takes 4096 tokens, so it is refused
    # at once instead of after the minutes vLLM takes to start
    write_talky_env(tmp_path)
    result = run_prime(["gepa", "run", "talky-gepa", "-m", "local", "-n", "40", "-N", "4", "--minibatch-size", "40",
                        "--plain"],
                       tmp_path, {"PRIME_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stderr.startswith("error: the reflection model SmolLM2-135M-Instruct takes 4096 tokens")
    assert "--minibatch-size" in result.stderr and "starting vLLM" not in result.stderr
