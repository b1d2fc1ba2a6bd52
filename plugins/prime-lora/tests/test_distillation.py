"""On-policy distillation in the orchestrator: a teacher server scores the policy's tokens (vLLM's
prompt_logprobs), each sample gets teacher_logprobs and token_advantages, the batch's teacher_kl is a
step metric, and a teacher that fails makes an errored rollout, never trained on."""

from __future__ import annotations

import asyncio
import json

import pytest

import prime_cli.envs as vf
from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import EndpointSpec, OpenAIChatClient, TrainingRunLayout
from prime_lora.orchestrator import loop
from prime_lora.orchestrator.__main__ import main
from prime_lora.orchestrator.batching import Group, group_samples
from prime_lora.orchestrator.sampler import EnvRows, EnvSampler
from prime_lora.orchestrator.teacher import (
    TeacherClient,
    TeacherEndpoint,
    TeacherError,
    teacher_endpoint,
    teacher_kl,
    token_advantages,
)
from tests.support.scripted_server import ScriptedOpenAIServer, scripted_prompt_logprob

SCORES = {"good": 1.0, "bad": 0.0, "half": 0.5}


def graded(completion) -> float:
    return SCORES.get(str(completion[-1]["content"]) if completion else "", 0.0)


def tiny_env() -> vf.SingleTurnEnv:
    return vf.SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": ""} for i in range(4)],
                            rubric=vf.Rubric(funcs=[graded]))


def config(teacher_url: str = "http://teacher.invalid/v1", **loss) -> RLConfig:
    return RLConfig.model_validate({
        "max_steps": 1, "trainer": {"loss": {"teacher_tau": 0.5, "adv_tau": 1.0, **loss}},
        "orchestrator": {"batch_size": 4, "rollouts_per_example": 4, "env": [{"id": "tiny"}],
                         "teacher_model": {"client": {"base_url": teacher_url}, "model": {"name": "big"}}}})


def client_for(server: ScriptedOpenAIServer, **kwargs) -> TeacherClient:
    return TeacherClient(TeacherEndpoint(server.url, "big"), backoff_s=0.01, **kwargs)


SAMPLE = {"input_ids": [5, 6, 7, 8, 9], "loss_mask": [0, 0, 1, 1, 0],
          "inference_logprobs": [0.0, 0.0, -0.25, -1.5, 0.0]}


async def score(server: ScriptedOpenAIServer, sample=SAMPLE, **kwargs):
    client = client_for(server, **kwargs)
    try:
        return await client.score(sample)
    finally:
        await client.aclose()


def test_the_teacher_is_asked_for_the_prompt_logprobs_of_the_whole_sequence_and_kept_on_loss_tokens():
    with ScriptedOpenAIServer(models=["big"]) as server:
        scored = asyncio.run(score(server))
        (request,) = server.requests_to("/v1/completions")
    assert request["json"] == {"model": "big", "prompt": [5, 6, 7, 8, 9], "max_tokens": 1, "prompt_logprobs": 0,
                               "temperature": 1.0}
    ids = SAMPLE["input_ids"]
    assert scored["teacher_logprobs"] == [0.0, 0.0, scripted_prompt_logprob(ids, 2), scripted_prompt_logprob(ids, 3),
                                          0.0]
    assert scored["inference_logprobs"] == SAMPLE["inference_logprobs"]  # the rest of the sample is unchanged


def test_5xx_and_dropped_connections_are_retried_and_a_refusal_is_not():
    with ScriptedOpenAIServer(faults=["500", "drop", "ok"]) as server:
        scored = asyncio.run(score(server))
        assert len(server.requests_to("/v1/completions")) == 3
    assert scored["teacher_logprobs"][2] == scripted_prompt_logprob(SAMPLE["input_ids"], 2)
    with ScriptedOpenAIServer(faults=["500"] * 4) as server, pytest.raises(TeacherError, match=r"HTTP 500\) 4 times"):
        asyncio.run(score(server))
    with ScriptedOpenAIServer(models=["other"]) as server:
        with pytest.raises(TeacherError, match=r"refused the call \(HTTP 404\).*`big` does not exist"):
            asyncio.run(score(server))
        assert len(server.requests_to("/v1/completions")) == 1


def test_a_reply_without_prompt_logprobs_for_each_token_is_a_teacher_error():
    with ScriptedOpenAIServer() as server:  # answers a text prompt without prompt_logprobs, as non-vLLM servers do
        client = client_for(server)

        async def plain_completion():
            try:
                return await client.token_logprobs(["not", "ids"])  # type: ignore[list-item]
            finally:
                await client.aclose()

        with pytest.raises(TeacherError, match="no prompt_logprobs"):
            asyncio.run(plain_completion())


def test_a_sequence_filling_the_teachers_context_is_sent_without_its_last_token():
    # vLLM refuses a prompt that leaves no room for the token it must generate
    with ScriptedOpenAIServer() as server:
        client = client_for(server)
        client._max_model_len = 5

        async def run():
            try:
                return await client.score({**SAMPLE, "loss_mask": [0, 0, 1, 1, 1],
                                           "inference_logprobs": [0.0, 0.0, -0.25, -1.5, -0.75]})
            finally:
                await client.aclose()

        scored = asyncio.run(run())
        (request,) = server.requests_to("/v1/completions")
    assert request["json"]["prompt"] == [5, 6, 7, 8]
    assert scored["teacher_logprobs"][-1] == -0.75  # the policy's own: no distillation term on it
    assert scored["teacher_logprobs"][3] == scripted_prompt_logprob([5, 6, 7, 8], 3)


def test_token_advantages_join_the_group_advantage_and_the_teachers_log_ratio():
    sample = {**SAMPLE, "teacher_logprobs": [0.0, 0.0, -0.75, -0.5, 0.0]}
    assert token_advantages(sample, 0.5, adv_tau=1.0, teacher_tau=2.0) == pytest.approx(
        [0.0, 0.0, 0.5 + 2.0 * (-0.75 + 0.25), 0.5 + 2.0 * (-0.5 + 1.5), 0.0])
    assert token_advantages(sample, 0.5, adv_tau=0.0, teacher_tau=1.0) == pytest.approx([0, 0, -0.5, 1.0, 0])
    group = Group(env="tiny", example_id=0, rewards=[1.0, 0.0], samples=[[sample], [sample]])
    loss = config().trainer.loss  # teacher_tau 0.5, adv_tau 1.0
    first, second = group_samples(group, loss)
    assert first["token_advantages"] == pytest.approx([0, 0, 0.5 - 0.25, 0.5 + 0.5, 0])
    assert second["token_advantages"] == pytest.approx([0, 0, -0.5 - 0.25, -0.5 + 0.5, 0])
    assert "token_advantages" not in group_samples(group)[0]  # no loss given: the plain RL sample
    # the reverse-KL estimate: mean over loss tokens of inference - teacher
    assert teacher_kl([sample]) == pytest.approx(((-0.25 + 0.75) + (-1.5 + 0.5)) / 2)
    assert teacher_kl([SAMPLE]) is None


def test_teacher_endpoint_is_its_own_server_or_the_runs_vllm(monkeypatch):
    own = config()
    assert teacher_endpoint(own.orchestrator.teacher_model, own, "http://run/v1") == TeacherEndpoint(
        "http://teacher.invalid/v1", "big")
    adapter = RLConfig.model_validate({"trainer": {"loss": {"teacher_tau": 1.0}}, "orchestrator": {
        "env": [{"id": "tiny"}], "teacher_model": {"adapter": "weights/step_20"}}})
    assert teacher_endpoint(adapter.orchestrator.teacher_model, adapter, "http://run/v1") == TeacherEndpoint(
        "http://run/v1", "teacher")
    # the run's own model, named as the config names it: the name its vLLM serves it under
    from prime_lora.orchestrator import teacher as teacher_module

    monkeypatch.setattr(teacher_module, "training_weights", lambda name: type("W", (), {"served_name": f"served-{name}"}))
    base = RLConfig.model_validate({"trainer": {"loss": {"teacher_tau": 1.0}}, "orchestrator": {
        "env": [{"id": "tiny"}], "teacher_model": {"model": {"name": "local"}}}})
    assert teacher_endpoint(base.orchestrator.teacher_model, base, "http://run/v1") == TeacherEndpoint(
        "http://run/v1", "served-local")


def draws(env) -> EnvSampler:
    return EnvSampler([EnvRows("tiny", env, env.get_dataset(), 1.0)], seed=0)


def test_a_rollout_the_teacher_cannot_score_is_an_errored_rollout_counted_by_kind(capsys):
    replies = iter(["good", "bad", "half", "good"])
    cfg = config()
    # the teacher refuses one of the group's four calls (a 400: not retried)
    with ScriptedOpenAIServer(lambda body: next(replies), token_ids=True) as policy, \
            ScriptedOpenAIServer(faults=["ok", "overlong", "ok", "ok"]) as teacher_server:
        client = client_for(teacher_server)

        async def run():
            chat = OpenAIChatClient(EndpointSpec("p", cfg.policy_name, policy.url, None), return_token_ids=True)
            try:
                return await loop.collect_batch(draws(tiny_env()), chat, cfg, teacher=client)
            finally:
                await chat.aclose()
                await client.aclose()

        stats = asyncio.run(run())
    (group,) = stats.kept
    assert group.errors == {"TeacherError": 1} and group.dropped_rollouts == 1 and len(group.rewards) == 3
    summary = stats.summary(1, 0, 1.0, 0.0, 3)
    assert summary["error_rate/TeacherError"] == 0.25 and summary["errored_rollouts"] == 1
    assert "[TeacherError] (each distinct error is logged once): TeacherError: the teacher refused the call " \
           "(HTTP 400)" in capsys.readouterr().err
    samples = [s for g in stats.kept for s in group_samples(g, cfg.trainer.loss)]
    assert len(samples) == 3 and all("token_advantages" in s for s in samples)


def test_the_orchestrator_writes_distillation_samples_and_the_teacher_kl(tmp_path, monkeypatch, capsys):
    env = tiny_env()
    monkeypatch.setattr(loop, "load_env_rows", lambda cfg: [EnvRows("tiny", env, env.get_dataset(), 1.0)])

    class LoadedWeights:
        loaded, last_load_s, last_before_load_s = 0, 0.0, 0.0

        async def ensure(self, min_step, **kwargs):
            return 0.0

    monkeypatch.setattr(loop, "PolicyWeights", lambda *args: LoadedWeights())
    replies = iter(["good", "bad", "half", "good"])
    with ScriptedOpenAIServer(lambda body: next(replies), token_ids=True) as policy, \
            ScriptedOpenAIServer(models=["big"], prompt_logprob=lambda ids, i: -0.5) as teacher:
        cfg = config(teacher.url)
        path = tmp_path / "config.json"
        path.write_text(cfg.model_dump_json())
        assert main(["--config", str(path), "--base-url", policy.url]) == 0
    layout = TrainingRunLayout(tmp_path)
    batch = [json.loads(line) for line in layout.batch_path(1).read_text().splitlines()]
    stats = json.loads(layout.batch_stats_path(1).read_text())
    loss_tokens = [(s, i) for s in batch for i, m in enumerate(s["loss_mask"]) if m]
    assert len(batch) == 4 and loss_tokens
    for sample, i in loss_tokens:
        assert sample["teacher_logprobs"][i] == -0.5
        want = sample["advantage"] + 0.5 * (-0.5 - sample["inference_logprobs"][i])
        assert sample["token_advantages"][i] == pytest.approx(want)
    want_kl = sum(s["inference_logprobs"][i] + 0.5 for s, i in loss_tokens) / len(loss_tokens)
    assert stats["teacher_kl"] == pytest.approx(want_kl)
    assert f"teacher KL {want_kl:.4f}" in capsys.readouterr().out


def test_the_runs_vllm_serves_a_teacher_adapter_beside_the_policy(tmp_path):
    from prime_cli.serve.server import build_command
    from prime_lora.inference import inference_options

    adapter = tmp_path / "sft" / "weights" / "step_20"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 32, "target_modules": ["q_proj"]}))
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    cfg = RLConfig.model_validate({"trainer": {"loss": {"teacher_tau": 1.0}, "model": {"lora": {"rank": 8}}},
                                   "orchestrator": {"env": [{"id": "tiny"}],
                                                    "teacher_model": {"adapter": str(adapter)}}})
    command = build_command(inference_options(cfg, "/models/tiny", "tiny"), "cpu")
    assert command[command.index("--lora-modules") + 1] == f"teacher={adapter}"
    assert command[command.index("--max-loras") + 1] == "2"
    assert command[command.index("--max-lora-rank") + 1] == "32"  # the teacher's rank, above the policy's 8
    plain = build_command(inference_options(config(), "/models/tiny", "tiny"), "cpu")  # a teacher server of its own
    assert "--lora-modules" not in plain and plain[plain.index("--max-loras") + 1] == "1"


def test_the_context_length_of_an_adapter_teacher_is_its_servers(monkeypatch):
    from prime_lora.orchestrator import teacher as teacher_module

    cards = [{"id": "base", "max_model_len": 256}, {"id": "teacher", "parent": "base"}]  # as vLLM lists them
    monkeypatch.setattr(teacher_module, "served_model_cards", lambda url: cards)

    async def length(name):
        client = TeacherClient(TeacherEndpoint("http://x/v1", name))
        try:
            return await client.max_model_len()
        finally:
            await client.aclose()

    assert asyncio.run(length("teacher")) == 256
    cards[:] = [{"id": "teacher"}]
    assert asyncio.run(length("teacher")) is None  # not a vLLM listing: nothing is cut
