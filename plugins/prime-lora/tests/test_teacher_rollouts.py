"""SFT on a teacher's rollouts (orchestrator/teacher_rollouts.py): a scripted teacher plays a tiny environment,
its answers get different rewards, and exactly the rollouts the filter keeps become SFT samples (the loss on the
teacher's words); errors and unusable rollouts are counted; a resumed run writes the batch a straight one does."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter

import pytest
from sft_tiny import tiny_tokenizer

import prime_cli.envs as vf
from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import EndpointSpec, OpenAIChatClient, TrainingRunLayout
from prime_lora.orchestrator import loop, sft_loop, teacher_rollouts
from prime_lora.orchestrator.__main__ import main
from prime_lora.orchestrator.rollout_errors import ErrorLog
from prime_lora.orchestrator.sampler import EnvRows, EnvSampler
from prime_lora.orchestrator.teacher_rollouts import chosen, collect_teacher_batch
from tests.support.scripted_server import ScriptedOpenAIServer, content_text

REWARDS = {"good": 1.0, "half": 0.5, "bad": 0.0}
ANSWERS = ["good", "bad", "half", "good"]  # each example's group of 4 gets these, in some order


def graded(completion) -> float:
    text = str(completion[-1]["content"]) if completion else ""
    for word, reward in REWARDS.items():
        if text.startswith(word):
            return reward
    raise ValueError(f"cannot grade {text!r}")


def tiny_env() -> vf.SingleTurnEnv:
    return vf.SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": ""} for i in range(6)],
                            rubric=vf.Rubric(funcs=[graded]))


class Teacher:
    """Answers the n-th call for a question with answers[n % len(answers)]."""

    def __init__(self, answers=ANSWERS):
        self.answers, self.calls = answers, Counter()

    def __call__(self, body) -> str:
        question = content_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        self.calls[question] += 1
        return self.answers[(self.calls[question] - 1) % len(self.answers)]


def config(url: str = "http://teacher.invalid/v1", seq_len: int = 256, orchestrator=None, **teacher) -> RLConfig:
    return RLConfig.model_validate({
        "max_steps": 2, "seq_len": seq_len, "inference": {"model": {"max_model_len": seq_len}},
        "orchestrator": {"batch_size": 4, "rollouts_per_example": 4, "env": [{"id": "tiny"}], **(orchestrator or {}),
                         "teacher_rollout_model": {"client": {"base_url": url}, "model": {"name": "big"}, **teacher}}})


def trained_text(tokenizer, sample) -> str:
    return tokenizer.decode([t for t, m in zip(sample["input_ids"], sample["loss_mask"], strict=True) if m])


def collect(cfg: RLConfig, server: ScriptedOpenAIServer, env=None, surplus=None, log=None):
    env = env or tiny_env()
    sampler = EnvSampler([EnvRows("tiny", env, env.get_dataset(), 1.0)], seed=0)

    async def run():
        client = OpenAIChatClient(EndpointSpec("teacher", "big", server.url, None))
        try:
            return await collect_teacher_batch(sampler, client, "big", cfg, tiny_tokenizer(), surplus if surplus
                                               is not None else [], log or ErrorLog(), step=1)
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_chosen_keeps_rewards_at_least_min_reward_and_the_first_best():
    assert chosen([0.5, 1.0, 0.0, 1.0], None, False) == [0, 1, 2, 3]
    assert chosen([0.5, 1.0, 0.0, 1.0], 0.5, False) == [0, 1, 3]
    assert chosen([0.5, 1.0, 0.0, 1.0], None, True) == [1]
    assert chosen([0.5, 0.25], 0.75, True) == []


@pytest.mark.parametrize("best_per_example", [False, True])
def test_exactly_the_rewarded_rollouts_of_the_teacher_become_samples(best_per_example):
    with ScriptedOpenAIServer(Teacher()) as server:
        batch = collect(config(min_reward=1.0, best_per_example=best_per_example), server)
    tokenizer = tiny_tokenizer()
    assert len(batch.samples) == 4
    assert [trained_text(tokenizer, s) for s in batch.samples] == ["good<|end|>"] * 4  # the teacher's words only
    assert all(s["reward"] == 1.0 and s["advantage"] == 0.0 and s["env"] == "tiny" for s in batch.samples)
    assert all(set(s["inference_logprobs"]) == {0.0} for s in batch.samples)
    prompt = tokenizer.decode(batch.samples[0]["input_ids"][: batch.samples[0]["loss_mask"].index(1)])
    assert prompt.startswith("<|start|>user<|sep|>q") and prompt.endswith("<|start|>assistant<|sep|>")
    stats = batch.stats()
    # 2 good of 4 per example: 2 examples give 4 samples; each example's best alone: 4 examples
    examples = 4 if best_per_example else 2
    assert (stats["teacher_examples"], stats["rollouts_sampled"]) == (examples, 4 * examples)
    assert stats["teacher_kept"] == 4 and stats["teacher_filtered"] == 4 * examples - 4
    assert stats["reward_mean"] == pytest.approx(2.5 / 4) and stats["errored_rollouts"] == 0


def test_without_a_filter_every_scored_rollout_is_a_sample_and_the_surplus_waits_for_the_next_step():
    surplus: list = []
    with ScriptedOpenAIServer(Teacher(["good", "bad", "half"])) as server:
        batch = collect(config(orchestrator={"batch_size": 3}), server, surplus=surplus)
    assert len(batch.samples) == 3 and len(surplus) == 1  # one example of 4 rollouts, 3 trained now
    assert batch.stats()["teacher_kept"] == 4


def test_errored_and_unusable_rollouts_are_counted_and_never_samples(capsys):
    # "garbled" makes the reward function raise (an errored rollout); a long good answer exceeds seq_len
    answers = ["good", "garbled", "good" + "!" * 80, "half"]
    with ScriptedOpenAIServer(Teacher(answers)) as server:
        batch = collect(config(seq_len=96, min_reward=1.0, orchestrator={"max_error_rate": 1.0}), server)
    stats = batch.stats()
    assert len(batch.samples) == 4 and all(trained_text(tiny_tokenizer(), s) == "good<|end|>" for s in batch.samples)
    assert stats["errored_rollouts"] == batch.examples and stats["error_rate/reward:graded"] == 0.25
    assert stats["teacher_bad_rows"] == batch.examples and batch.bad == {"longer than seq_len (105 tokens)": 4}
    assert stats["teacher_filtered"] == batch.examples  # the half
    assert "reward function graded raised ValueError: cannot grade 'garbled'" in capsys.readouterr().err


def test_a_teacher_whose_rollouts_all_fail_stops_the_step_with_the_cause():
    with ScriptedOpenAIServer(Teacher(["garbled"])) as server:
        batch = collect(config(min_reward=1.0), server)
    assert batch.fault.startswith("4 of 4 rollouts failed at step 1") and "cannot grade 'garbled'" in batch.fault


@pytest.fixture
def orchestrator(monkeypatch, tmp_path):
    """main() of the orchestrator on the tiny environment and tokenizer, with weights step 0 written."""
    env = tiny_env()
    monkeypatch.setattr(loop, "load_env_rows", lambda cfg: [EnvRows("tiny", env, env.get_dataset(), 1.0)])
    monkeypatch.setattr(teacher_rollouts, "load_env_rows", lambda cfg: [EnvRows("tiny", env, env.get_dataset(), 1.0)])
    monkeypatch.setattr(teacher_rollouts, "load_tokenizer", lambda cfg: tiny_tokenizer())
    monkeypatch.setattr(sft_loop, "load_tokenizer", lambda cfg: tiny_tokenizer())

    def run(out, cfg, *args):
        (TrainingRunLayout(out).weights_dir(0)).mkdir(parents=True, exist_ok=True)
        (TrainingRunLayout(out).weights_dir(1)).mkdir(parents=True, exist_ok=True)
        out.mkdir(exist_ok=True)
        (out / "config.json").write_text(cfg.model_dump_json())
        return main(["--config", str(out / "config.json"), *args])

    return run


def test_the_orchestrator_writes_teacher_sft_batches_and_a_resume_writes_the_same_next_batch(
        tmp_path, orchestrator, capsys):
    # answers fixed per question (q0 good, q1 bad, q2 half, ...): what a step trains on depends on the draws only
    answer = {f"q{i}": ["good", "bad", "half"][i % 3] for i in range(6)}
    replies = lambda body: answer[content_text(body["messages"][-1]["content"])]  # noqa: E731
    with ScriptedOpenAIServer(replies) as server:
        cfg = config(server.url, min_reward=0.5, best_per_example=True)
        assert orchestrator(tmp_path / "straight", cfg) == 0
        straight = TrainingRunLayout(tmp_path / "straight")
        resumed = TrainingRunLayout(tmp_path / "resumed")
        resumed.rollouts_dir(1).mkdir(parents=True)
        shutil.copytree(straight.rollouts_dir(1), resumed.rollouts_dir(1), dirs_exist_ok=True)
        checkpoint = loop.checkpoint_path(tmp_path / "resumed", 1)  # the trainer copies the progress there
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(straight.rollouts_dir(1) / TrainingRunLayout.ORCHESTRATOR_CHECKPOINT, checkpoint)
        assert orchestrator(tmp_path / "resumed", cfg, "--resume-step", "1") == 0
    out = capsys.readouterr().out
    assert "samples from the teacher's rollouts (reward" in out and "kept" in out and "filtered out" in out
    for step in (1, 2):
        batch = [json.loads(line) for line in straight.batch_path(step).read_text().splitlines()]
        assert len(batch) == 4 and {s["reward"] for s in batch} <= {1.0, 0.5}
        stats = json.loads(straight.batch_stats_path(step).read_text())
        assert stats["samples"] == 4 and stats["teacher_kept"] >= 4 - stats["teacher_carried"]
        assert {"teacher_filtered", "errored_rollouts", "loss_tokens", "reward_mean"} <= set(stats)
    assert resumed.batch_path(2).read_text() == straight.batch_path(2).read_text()
