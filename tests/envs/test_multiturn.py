import asyncio

import pytest

import prime_cli.envs as vf
from tests.support.scripted_client import ScriptedClient

ROWS = [{"question": "2+3?", "answer": "5"}]


def exact(completion, answer, parser) -> float:
    return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0


class CountdownEnv(vf.MultiTurnEnv):
    """Replies "again" until the model says "done"; cleans up a resource."""

    def __init__(self, **kwargs):
        super().__init__(dataset=ROWS, **kwargs)
        self.cleaned = []

    async def setup_state(self, state, **kwargs):
        state["resource"] = "open"
        return state

    @vf.stop
    async def said_done(self, state) -> bool:
        completion = state["completion"]
        return bool(completion) and completion[-1]["content"] == "done"

    async def env_response(self, messages, state, **kwargs):
        return [{"role": "user", "content": f"again {state['turn']}"}]

    @vf.cleanup
    async def release(self, state):
        self.cleaned.append(state["resource"])


async def test_single_turn_rollout_records_trajectory_tokens_usage_and_timing():
    env = vf.SingleTurnEnv(dataset=ROWS, parser=vf.Parser(), rubric=vf.Rubric(funcs=[exact]))
    client = ScriptedClient(["5"], token_ids=True)
    [state] = await env.run_group(client, "m", env.get_dataset()[0], n=1)
    assert state["completion"] == [{"role": "assistant", "content": "5"}]
    assert state["reward"] == 1.0 and state["metrics"] == {"exact": 1.0}
    assert state["stop_condition"] == "single_turn_done"
    assert state["is_completed"] is True and state["is_truncated"] is False and state["error"] is None
    [step] = state["trajectory"]
    assert step["completion_token_ids"] == [ord("5")] and step["completion_logprobs"] == [-0.5]
    assert step["messages"] == env.get_dataset()[0]["prompt"]
    assert state["usage"]["completion_tokens"] == 1 and state["usage"]["prompt_tokens"] > 0
    assert state["timing"]["total_ms"] >= state["timing"]["generation_ms"] >= 0


async def test_multi_turn_loop_stop_decorator_setup_and_cleanup():
    env = CountdownEnv()
    client = ScriptedClient(["a", "b", "done"])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    roles = [m["role"] for m in state["completion"]]
    assert roles == ["assistant", "user", "assistant", "user", "assistant"]
    assert state["completion"][1]["content"] == "again 1"
    assert state["turn"] == 3 and state["stop_condition"] == "said_done"
    assert env.cleaned == ["open"]
    # each model call saw the whole conversation so far
    assert [len(c["messages"]) for c in client.calls] == [1, 3, 5]


async def test_max_turns_counts_model_calls_and_marks_truncated():
    env = CountdownEnv(max_turns=2)
    state = await env.rollout(ScriptedClient(["never done"]), "m", env.get_dataset()[0])
    assert state["turn"] == 2 and state["stop_condition"] == "max_turns_reached"
    assert state["is_truncated"] is True and state["is_completed"] is True


class FinalEnv(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        reply = [{"role": "user", "content": "game over"}]
        state["final_env_response"] = reply
        return reply


async def test_final_env_response_ends_rollout_after_its_messages():
    env = FinalEnv(dataset=ROWS)
    client = ScriptedClient(["move"])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    assert [m["content"] for m in state["completion"]] == ["move", "game over"]
    assert state["stop_condition"] == "has_final_env_response" and len(client.calls) == 1


class LegacyEnv(vf.MultiTurnEnv):
    """verifiers' older style: is_completed(messages, state) and a (messages, state) return."""

    def is_completed(self, messages, state, **kwargs):
        return state["turn"] >= 2

    def env_response(self, messages, state, **kwargs):
        return [{"role": "user", "content": "more"}], state


async def test_legacy_is_completed_and_tuple_env_response_still_work():
    env = LegacyEnv(dataset=ROWS)
    state = await env.rollout(ScriptedClient(["x"]), "m", env.get_dataset()[0])
    assert state["turn"] == 2 and state["stop_condition"] == "is_completed"
    assert [m["role"] for m in state["completion"]] == ["assistant", "user", "assistant"]


async def test_model_error_is_recorded_cleanup_runs_and_group_continues():
    env = CountdownEnv()
    client = ScriptedClient(["a", vf.ModelError("HTTP 500 after 3 retries")])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    assert state["error"] == {"type": "ModelError", "message": "HTTP 500 after 3 retries"}
    assert state["stop_condition"] == "has_error" and state["is_completed"] is False
    assert env.cleaned == ["open"]
    assert len(state["completion"]) == 2  # what happened before the error is kept


async def test_overlong_prompt_is_a_truncation_not_an_error():
    env = vf.SingleTurnEnv(dataset=ROWS)
    state = await env.rollout(ScriptedClient([vf.OverlongPromptError("context 2048 exceeded")]), "m", env.get_dataset()[0])
    assert state["error"] is None and state["is_truncated"] is True
    assert state["stop_condition"] == "prompt_too_long"
    # the server's words, for a trainer that must say why a rollout has no tokens
    assert state["prompt_too_long_error"] == {"type": "OverlongPromptError", "message": "context 2048 exceeded"}


async def test_an_error_keeps_its_traceback_beside_its_record_with_secrets_masked():
    env = CountdownEnv()
    client = ScriptedClient([vf.ModelError("HTTP 500 (Authorization: Bearer abc123secret, key sk-abcdef123456)")])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    assert state["error"]["type"] == "ModelError"
    trace = state["error_traceback"]
    assert trace.startswith("Traceback (most recent call last)") and "get_model_response" in trace
    assert "abc123secret" not in trace and "sk-abcdef123456" not in trace and "Bearer ***" in trace


async def test_env_bug_is_recorded_with_its_type():
    class Buggy(vf.MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            raise KeyError("missing")

    env = Buggy(dataset=ROWS)
    state = await env.rollout(ScriptedClient(["x"]), "m", env.get_dataset()[0])
    assert state["error"]["type"] == "KeyError" and state["stop_condition"] == "has_error"


async def test_empty_model_response_is_an_error_but_length_cut_is_truncation():
    env = vf.SingleTurnEnv(dataset=ROWS)
    empty = vf.ChatResponse(message={"role": "assistant", "content": None}, finish_reason="stop")
    state = await env.rollout(ScriptedClient([empty]), "m", env.get_dataset()[0])
    assert state["error"]["type"] == "EmptyModelResponseError"
    cut = vf.ChatResponse(message={"role": "assistant", "content": "partial"}, finish_reason="length")
    state = await env.rollout(ScriptedClient([cut]), "m", env.get_dataset()[0])
    assert state["error"] is None and state["is_truncated"] is True


async def test_group_rollouts_run_concurrently_and_group_functions_see_the_group():
    seen_sizes = []

    def rank_bonus(completions, answers) -> list[float]:
        seen_sizes.append(len(completions))
        return [1.0 if i == 0 else 0.0 for i in range(len(completions))]

    env = vf.SingleTurnEnv(dataset=ROWS, rubric=vf.Rubric(funcs=[rank_bonus]))
    client = ScriptedClient(["5"], delay=0.2)
    loop = asyncio.get_running_loop()
    start = loop.time()
    states = await env.run_group(client, "m", env.get_dataset()[0], n=8)
    assert loop.time() - start < 0.2 * 4  # 8 rollouts of 0.2 s in parallel, not 1.6 s in series
    assert seen_sizes == [8]
    assert sorted(s["reward"] for s in states) == [0.0] * 7 + [1.0]


async def test_independent_scoring_scores_each_rollout_alone():
    sizes = []

    def group_fn(completions) -> list[float]:
        sizes.append(len(completions))
        return [0.5] * len(completions)

    env = vf.SingleTurnEnv(dataset=ROWS, rubric=vf.Rubric(funcs=[group_fn]))
    states = await env.run_group(ScriptedClient(["5"]), "m", env.get_dataset()[0], n=3, independent_scoring=True)
    assert sizes == [1, 1, 1] and [s["reward"] for s in states] == [0.5] * 3


async def test_sampling_args_merge_env_defaults_with_call_args():
    env = vf.SingleTurnEnv(dataset=ROWS, sampling_args={"temperature": 0.2, "max_tokens": 50})
    client = ScriptedClient(["5"])
    await env.rollout(client, "m", env.get_dataset()[0], {"max_tokens": 10})
    assert client.calls[0]["sampling_args"] == {"temperature": 0.2, "max_tokens": 10}


async def test_completion_mode_uses_the_completion_client():
    env = vf.SingleTurnEnv(dataset=[{"question": "Once upon a", "answer": "time"}], message_type="completion")
    client = ScriptedClient([" time"])
    state = await env.rollout(client, "m", env.get_dataset()[0])
    assert state["completion"] == " time" and client.calls[0]["prompt"] == "Once upon a"


def test_stop_decorator_priority_orders_conditions():
    class Env(vf.MultiTurnEnv):
        @vf.stop(priority=5)
        async def b_first(self, state):
            return False

        @vf.stop
        async def a_later(self, state):
            return False

    names = [name for name, _ in Env(dataset=ROWS)._stop_conditions]
    assert names.index("b_first") < names.index("a_later")
    assert names[0] == "has_error" and names[-1] == "max_turns_reached"


def test_unknown_environment_kwargs_are_reported(caplog):
    with caplog.at_level("WARNING"):
        vf.SingleTurnEnv(dataset=ROWS, max_concurrnt=4)
    assert "max_concurrnt" in caplog.text


@pytest.mark.parametrize("bad", [0, 1])
def test_single_turn_env_ignores_max_turns(bad):
    assert vf.SingleTurnEnv(dataset=ROWS, max_turns=bad).max_turns == 1
