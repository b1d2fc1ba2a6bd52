"""The orchestrator's batch assembly with a scripted environment: filtering, oversampling, samples, resume."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import TrainingRunLayout
from prime_lora.orchestrator import loop
from prime_lora.orchestrator.sampler import EnvRows, EnvSampler
from prime_lora.orchestrator.samples import NoTokens, rollout_samples


class ScriptedEnv:
    """Rows whose example_id decides the rewards: id % 3 == 0 -> all equal (no signal)."""

    def __init__(self, error_every: int = 0):
        self.calls: list[int] = []
        self.error_every = error_every

    async def run_group(self, client, model, row, n, sampling_args):
        self.calls.append(row["example_id"])
        states = []
        for i in range(n):
            reward = 0.5 if row["example_id"] % 3 == 0 else i / n
            states.append({"reward": reward, "usage": {"completion_tokens": 3}, "is_truncated": False,
                           "error": {"type": "ModelError", "message": "x"} if self.error_every and i % self.error_every == 0 else None,
                           "trajectory": [{"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5, i],
                                           "completion_logprobs": [-0.1, -0.2, -0.3]}]})
        return states


def config(**orchestrator) -> RLConfig:
    base = {"batch_size": 8, "rollouts_per_example": 4, "env": [{"id": "scripted"}]}
    return RLConfig.model_validate({"orchestrator": {**base, **orchestrator}})


def sampler(env, rows=12, seed=0) -> EnvSampler:
    return EnvSampler([EnvRows("scripted", env, [{"example_id": i} for i in range(rows)], 1.0)], seed)


def test_filtering_drops_groups_without_signal_and_still_fills_the_batch():
    env = ScriptedEnv()
    cfg = config(buffer={"online_difficulty_filtering": True}, oversampling_factor=1.5)
    stats = asyncio.run(loop.collect_batch(sampler(env), None, cfg))
    assert len(stats.kept) == 2 and all(g.example_id % 3 for g in stats.kept)
    assert stats.groups_sampled == len(env.calls) >= 3  # oversampled: ceil(1.5 * 2) in the first round
    samples = [s for g in stats.kept for s in loop.group_samples(g)]
    assert len(samples) == cfg.orchestrator.batch_size
    for group in stats.kept:  # advantages are centred per group
        assert sum(s["advantage"] for s in samples if s["example_id"] == group.example_id) == pytest.approx(0)


def test_without_filtering_every_group_counts():
    env = ScriptedEnv()
    stats = asyncio.run(loop.collect_batch(sampler(env), None, config()))
    assert stats.groups_sampled == 2 and len(stats.kept) == 2


def test_easy_and_hard_thresholds_retire_examples_from_sampling_as_in_prime_rl():
    # groups of ids % 3 != 0 have mean reward 0.375 (rewards 0, .25, .5, .75): hard under 0.4. prime-rl's
    # buffer marks such an example hard and draws it no more; the group itself is still trained on
    env = ScriptedEnv()
    cfg = config(buffer={"hard_threshold": 0.4})
    draws = sampler(env)
    retired: set[int] = set()
    for _ in range(8):
        before = len(env.calls)
        stats = asyncio.run(loop.collect_batch(draws, None, cfg))
        batch_ids = env.calls[before:]
        assert not retired & set(batch_ids), "a retired example was drawn again"
        assert len(stats.kept) == 2  # thresholds do not drop this step's groups
        retired |= {i for i in batch_ids if i % 3}
    assert set(env.calls[-4:]) <= {0, 3, 6, 9}  # only the normal examples are left to draw
    state = json.loads(json.dumps(draws.state()))
    assert {int(k) for k in state["envs"]["scripted"]["retired"]} == retired
    again = sampler(ScriptedEnv())
    again.restore(state)
    assert all(again.next()[1]["example_id"] % 3 == 0 for _ in range(6))


def test_easy_threshold_marks_easy_and_a_normal_result_puts_an_example_back():
    cfg = config(buffer={"easy_threshold": 0.5})
    group = loop.Group(env="scripted", example_id=3, rewards=[0.5, 0.5], samples=[[], []])
    assert loop.difficulty(group, cfg.orchestrator.buffer) == "easy"
    draws = sampler(ScriptedEnv(), rows=2)
    draws.mark("scripted", 1, "easy")
    assert {draws.next()[1]["example_id"] for _ in range(4)} == {0}
    draws.mark("scripted", 1, "normal")
    assert 1 in {draws.next()[1]["example_id"] for _ in range(4)}


def test_min_reward_variance_drops_groups_below_it():
    # difficulty_threshold (the simplified prime-rl shape) is a minimum reward variance per group
    cfg = config(buffer={"min_reward_variance": 0.05})
    low = loop.Group(env="scripted", example_id=1, rewards=[0.0, 0.1, 0.2, 0.3], samples=[[{}]] * 4)  # var 0.0125
    high = loop.Group(env="scripted", example_id=2, rewards=[0.0, 0.0, 1.0, 1.0], samples=[[{}]] * 4)  # var 0.25
    assert not loop.keep_group(low, cfg.orchestrator.buffer)
    assert loop.keep_group(high, cfg.orchestrator.buffer)


def test_filtering_that_finds_nothing_falls_back_instead_of_stalling(capsys):
    class Flat(ScriptedEnv):
        async def run_group(self, client, model, row, n, sampling_args):
            return await super().run_group(client, model, {"example_id": 0}, n, sampling_args)

    stats = asyncio.run(loop.collect_batch(sampler(Flat()), None, config(buffer={"online_difficulty_filtering": True})))
    assert len(stats.kept) == 2
    assert "passed filtering" in capsys.readouterr().err


def test_errored_rollouts_are_dropped_and_counted():
    env = ScriptedEnv(error_every=4)  # rollout 0 of each group fails
    stats = asyncio.run(loop.collect_batch(sampler(env), None, config()))
    assert all(len(g.rewards) == 3 for g in stats.kept)
    assert stats.summary(1, 0, 1.0, 0.0, 6)["dropped_rollouts"] == 2


def test_a_fatal_endpoint_error_stops_the_orchestrator():
    class Down(ScriptedEnv):
        async def run_group(self, client, model, row, n, sampling_args):
            states = await super().run_group(client, model, row, n, sampling_args)
            states[0]["error"] = {"type": "FatalEndpointError", "message": "connection refused"}
            return states

    with pytest.raises(loop.EndpointDown, match="connection refused"):
        asyncio.run(loop.collect_batch(sampler(Down()), None, config()))


def test_any_error_recorded_as_fatal_stops_the_orchestrator():
    class Gone(ScriptedEnv):
        async def run_group(self, client, model, row, n, sampling_args):
            states = await super().run_group(client, model, row, n, sampling_args)
            states[0]["error"] = {"type": "SandboxGone", "message": "the sandbox service is gone", "fatal": True}
            return states

    with pytest.raises(loop.EndpointDown, match="the sandbox service is gone"):
        asyncio.run(loop.collect_batch(sampler(Gone()), None, config()))


def test_sampler_state_round_trips_through_json():
    first = sampler(ScriptedEnv(), seed=3)
    for _ in range(17):
        first.next()
    saved = json.loads(json.dumps(first.state()))
    second = sampler(ScriptedEnv(), seed=99)
    second.restore(saved)
    assert [first.next()[1]["example_id"] for _ in range(30)] == [second.next()[1]["example_id"] for _ in range(30)]


def test_multi_turn_rollouts_merge_when_prompts_extend_the_sequence():
    state = {"trajectory": [
        {"prompt_token_ids": [1, 2], "completion_token_ids": [3, 4], "completion_logprobs": [-1.0, -2.0]},
        {"prompt_token_ids": [1, 2, 3, 4, 9, 9], "completion_token_ids": [5], "completion_logprobs": [-3.0]}]}
    (sample,) = rollout_samples(state, seq_len=100)
    assert sample["input_ids"] == [1, 2, 3, 4, 9, 9, 5]
    assert sample["loss_mask"] == [0, 0, 1, 1, 0, 0, 1]
    assert sample["inference_logprobs"] == [0.0, 0.0, -1.0, -2.0, 0.0, 0.0, -3.0]
    state["trajectory"][1]["prompt_token_ids"] = [1, 7, 9]  # re-tokenised history: separate samples
    assert len(rollout_samples(state, seq_len=100)) == 2
    (cut,) = rollout_samples(state, seq_len=3)  # the second turn's sample keeps no completion token: dropped
    assert cut["input_ids"] == [1, 2, 3] and cut["truncated"]
    with pytest.raises(NoTokens):
        rollout_samples({"trajectory": [{"prompt_token_ids": [1], "completion_token_ids": [2],
                                         "completion_logprobs": None}]}, 10)


def test_batches_are_written_stats_first_and_atomically(tmp_path):
    folder = tmp_path / "rollouts" / "step_1"
    loop.write_batch(folder, [{"input_ids": [1]}], {"step": 1})
    assert json.loads((folder / "stats.json").read_text()) == {"step": 1}
    assert (folder / "batch.jsonl").read_text() == '{"input_ids": [1]}\n'
    assert not list(folder.glob(".*"))


def test_requests_pin_every_sampling_parameter_to_the_plain_softmax():
    """vLLM fills unset parameters from the model's generation_config.json; the environment's own
    sampling_args may set them too. The orchestrator's request leaves neither a say."""
    import prime_cli.envs as vf
    from prime_cli.clients import EndpointSpec, OpenAIChatClient
    from tests.support.scripted_server import ScriptedOpenAIServer

    env = vf.SingleTurnEnv(dataset=[{"question": "abc", "answer": "cba"}], rubric=vf.Rubric(funcs=[lambda: 1.0]),
                           sampling_args={"top_k": 20, "repetition_penalty": 1.05})
    cfg = config(sampling={"temperature": 0.7, "max_tokens": 9})
    with ScriptedOpenAIServer(token_ids=True) as server:
        client = OpenAIChatClient(EndpointSpec("policy", "policy", server.url, None), return_token_ids=True)
        entry = EnvRows("tiny", env, env.get_dataset(), 1.0)
        group = asyncio.run(loop.sample_group(entry, entry.rows[0], client, cfg))
        bodies = [r["json"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert len(bodies) == cfg.orchestrator.rollouts_per_example and len(group.rewards) == len(bodies)
    for body in bodies:
        assert {k: body.get(k) for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_tokens")} \
            == {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "max_tokens": 9}
        assert body["logprobs"] is True


class ErrorEnv(ScriptedEnv):
    """Rollout i of every group: reward i / n, or the error errors[i] (a type name) when given."""

    def __init__(self, errors: dict[int, str], stop_errors=()):
        super().__init__()
        self.errors, self.stop_errors = errors, stop_errors

    async def run_group(self, client, model, row, n, sampling_args):
        states = await super().run_group(client, model, {"example_id": 1}, n, sampling_args)
        for i, state in enumerate(states):
            if i in self.errors:
                state["error"] = {"type": self.errors[i], "message": "x"}
                state["reward"] = 0.9  # a rubric may score an errored rollout; it must not count
        return states


def test_policy_errors_keep_reward_zero_in_the_baseline_and_train_no_tokens():
    class LoopingTool(Exception):
        pass

    env = ErrorEnv({0: "EmptyModelResponseError", 1: "ToolParseError", 2: "LoopingTool"}, stop_errors=(LoopingTool,))
    cfg = config(rollouts_per_example=8, batch_size=8)
    (group,) = asyncio.run(loop.collect_batch(sampler(env), None, cfg)).kept
    assert group.rewards == [0.0, 0.0, 0.0, 3 / 8, 4 / 8, 5 / 8, 6 / 8, 7 / 8]
    samples = loop.group_samples(group)
    assert len(samples) == 5 and all(any(s["loss_mask"]) for s in samples)  # the errored ones train nothing
    baseline = sum(group.rewards) / 8
    assert [s["advantage"] for s in samples] == pytest.approx([r - baseline for r in group.rewards[3:]])


def test_infrastructure_errors_are_dropped_from_the_group_and_counted_by_type():
    env = ErrorEnv({0: "ModelError", 1: "InfraError", 2: "EmptyModelResponseError"})
    cfg = config(rollouts_per_example=8, batch_size=8)
    stats = asyncio.run(loop.collect_batch(sampler(env), None, cfg))
    (group,) = stats.kept
    assert group.rewards == [0.0, 3 / 8, 4 / 8, 5 / 8, 6 / 8, 7 / 8]  # 2 dropped, the policy's error kept
    summary = stats.summary(1, 0, 1.0, 0.0, 5)
    assert summary["error_rate"] == pytest.approx(3 / 8)
    assert {k: v for k, v in summary.items() if k.startswith("error_rate/")} == pytest.approx(
        {"error_rate/ModelError": 1 / 8, "error_rate/InfraError": 1 / 8, "error_rate/EmptyModelResponseError": 1 / 8})
    assert summary["dropped_rollouts"] == 2 and summary["policy_error_rollouts"] == 1


def signal_ids(groups) -> list:
    return [g.example_id for g in groups if max(g.rewards) > min(g.rewards)]


def test_surplus_groups_with_signal_wait_for_the_next_step():
    from prime_lora.orchestrator.buffer import SurplusGroups

    env, buffer = ScriptedEnv(), SurplusGroups()
    cfg = config(buffer={"online_difficulty_filtering": True}, oversampling_factor=3.0)
    draws = sampler(env)
    first = asyncio.run(loop.collect_batch(draws, None, cfg, buffer=buffer, policy_step=0, min_policy_step=0))
    surplus = signal_ids(first.all_groups)[2:]
    assert len(first.kept) == 2 and len(surplus) >= 1
    assert [g.example_id for g in buffer.groups] == surplus
    second = asyncio.run(loop.collect_batch(draws, None, cfg, buffer=buffer, policy_step=1, min_policy_step=0))
    reused = second.kept[:len(surplus[:2])]
    assert [g.example_id for g in reused] == surplus[:2] and all(g.policy_step == 0 for g in reused)
    assert second.groups_sampled == len(second.all_groups)  # the reused groups were not sampled again
    assert {s["policy_step"] for g in reused for s in loop.group_samples(g)} == {0}
    summary = second.summary(2, 1, 1.0, 0.0, 8)
    assert summary["groups_reused"] == len(reused) and summary["policy_step"] == 0  # the oldest weights in the batch


def test_buffered_groups_older_than_max_async_level_allows_are_dropped():
    from prime_lora.orchestrator.buffer import SurplusGroups

    buffer = SurplusGroups()
    cfg = config(buffer={"online_difficulty_filtering": True}, oversampling_factor=3.0)
    draws = sampler(ScriptedEnv())
    asyncio.run(loop.collect_batch(draws, None, cfg, buffer=buffer, policy_step=0, min_policy_step=0))
    stale = len(buffer.groups)
    assert stale >= 1
    later = asyncio.run(loop.collect_batch(draws, None, cfg, buffer=buffer, policy_step=3, min_policy_step=1))
    assert all(g.policy_step == 3 for g in later.kept)
    assert later.summary(4, 3, 1.0, 0.0, 8)["groups_stale_dropped"] == stale


def test_the_buffer_round_trips_through_json():
    from prime_lora.orchestrator.buffer import SurplusGroups

    buffer = SurplusGroups()
    cfg = config(buffer={"online_difficulty_filtering": True}, oversampling_factor=3.0)
    asyncio.run(loop.collect_batch(sampler(ScriptedEnv()), None, cfg, buffer=buffer, policy_step=5))
    restored = SurplusGroups()
    restored.restore(json.loads(json.dumps(buffer.state())))
    assert restored.groups == buffer.groups and restored.groups


def test_step_stats_report_sequence_lengths_and_the_filtered_fraction():
    env = ScriptedEnv()
    cfg = config(buffer={"online_difficulty_filtering": True}, oversampling_factor=1.5)
    stats = asyncio.run(loop.collect_batch(sampler(env), None, cfg))
    summary = stats.summary(1, 0, 1.0, 0.0, 8)
    filtered = sum(1 for g in stats.all_groups if max(g.rewards) == min(g.rewards))
    assert filtered >= 1 and summary["filtered_fraction"] == pytest.approx(filtered / stats.groups_sampled)
    # every scripted rollout: prompt [1, 2, 3], completion [4, 5, i]
    assert (summary["prompt_len_mean"], summary["prompt_len_max"]) == (3, 3)
    assert (summary["completion_len_mean"], summary["completion_len_max"]) == (3, 3)
    assert summary["error_rate"] == 0.0


def test_a_resumed_run_trains_on_the_surplus_its_checkpoint_kept(tmp_path, monkeypatch):
    class Weights:
        loaded, last_load_s = 0, 0.0

        async def ensure(self, min_step):
            return 0.0

    rows = [{"example_id": i} for i in range(12)]
    monkeypatch.setattr(loop, "load_env_rows", lambda cfg: [EnvRows("scripted", ScriptedEnv(), rows, 1.0)])
    monkeypatch.setattr(loop, "PolicyWeights", lambda *args: Weights())
    cfg = RLConfig.model_validate({"max_steps": 1, "orchestrator": {
        "batch_size": 8, "rollouts_per_example": 4, "oversampling_factor": 3.0, "env": [{"id": "scripted"}],
        "buffer": {"online_difficulty_filtering": True}}})
    assert asyncio.run(loop.run(cfg, tmp_path, "http://127.0.0.1:9/v1", None)) == 0
    progress = TrainingRunLayout(tmp_path).orchestrator_progress(1)
    surplus = json.loads(progress.read_text())["surplus"]
    loop.checkpoint_path(tmp_path, 1).parent.mkdir(parents=True)  # as the trainer's checkpoint of step 1 copies it
    shutil.copyfile(progress, loop.checkpoint_path(tmp_path, 1))
    first = json.loads((tmp_path / "rollouts" / "step_1" / "stats.json").read_text())
    assert len(surplus) == first["groups_buffered"] >= 1
    cfg.max_steps = 2
    assert asyncio.run(loop.run(cfg, tmp_path, "http://127.0.0.1:9/v1", 1)) == 0
    second = json.loads((tmp_path / "rollouts" / "step_2" / "stats.json").read_text())
    assert second["groups_reused"] == min(len(surplus), 2)
    batch = [json.loads(line) for line in (tmp_path / "rollouts" / "step_2" / "batch.jsonl").read_text().splitlines()]
    assert [s["example_id"] for s in batch][::4][:second["groups_reused"]] == [g["example_id"] for g in surplus][:2]
