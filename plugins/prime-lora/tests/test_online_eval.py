"""[orchestrator.eval] in the orchestrator: the adapter of each due step is loaded (not skipped over),
evaluated on the eval split beside the sampling, saved as an ordinary eval run, and summarised in
evals.jsonl, which the trainer copies into metrics.jsonl."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

import prime_cli.envs as vf
from prime_cli.results.eval_reader import read_entry
from prime_cli.results.eval_run import load_run
from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import TrainingRunLayout
from prime_lora.orchestrator import loop, weights
from prime_lora.orchestrator.sampler import EnvRows
from prime_lora.trainer.loop import MetricsLog
from tests.support.scripted_server import ScriptedOpenAIServer


def step_reward(completion) -> float:
    """The scripted server answers `adapter N` with N the adapter loaded at that moment: reward N / 10."""
    return int(str(completion[-1]["content"]).split()[-1]) / 10


def tiny_env() -> vf.SingleTurnEnv:
    return vf.SingleTurnEnv(dataset=[{"question": f"train {i}", "answer": ""} for i in range(6)],
                            eval_dataset=[{"question": f"held-out {i}", "answer": ""} for i in range(5)],
                            rubric=vf.Rubric(funcs=[step_reward]))


def eval_config(max_steps: int = 5, **section) -> RLConfig:
    return RLConfig.model_validate({"max_steps": max_steps, "orchestrator": {
        "batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "tiny"}],
        "eval": {"interval": 2, "num_examples": 3, "rollouts_per_example": 2, "env": [{"id": "tiny"}], **section}}})


class Server:
    """The scripted vLLM: chat answers name the adapter loaded now; an eval request waits (up to 10 s)
    until a training request came, which only happens when the eval does not block the sampling."""

    def __init__(self, monkeypatch):
        self.loaded: list[int] = []
        self.eval_prompts: list[tuple[int, str]] = []
        self.sampling_started = threading.Event()
        self.eval_beside_sampling: list[bool] = []
        monkeypatch.setattr(weights, "load_adapter", lambda url, name, path: self.loaded.append(int(path.name[5:])))
        monkeypatch.setattr(weights, "reset_prefix_cache", lambda url: True)

    def reply(self, body):
        adapter = self.loaded[-1]
        if body.get("return_token_ids"):  # the training client
            self.sampling_started.set()
        else:
            self.eval_beside_sampling.append(self.sampling_started.wait(10))
            self.eval_prompts.append((adapter, body["messages"][-1]["content"]))
        return f"adapter {adapter}"


def run_orchestrator(tmp_path, monkeypatch, cfg: RLConfig, resume_step=None) -> Server:
    server = Server(monkeypatch)
    env = tiny_env()
    monkeypatch.setattr(loop, "load_env_rows", lambda c: [EnvRows("tiny", env, env.get_dataset(), 1.0)])
    monkeypatch.setattr(vf, "load_environment", lambda env_id, **args: env)  # what online_eval imports
    for step in range(cfg.max_steps + 1):  # a trainer far ahead: every adapter is there at once
        TrainingRunLayout(tmp_path).weights_dir(step).mkdir(parents=True, exist_ok=True)
    with ScriptedOpenAIServer(reply=server.reply, token_ids=True) as scripted:
        assert asyncio.run(loop.run(cfg, tmp_path, scripted.url, resume_step)) == 0
    return server


def test_each_due_adapter_is_evaluated_on_the_eval_split_and_saved_as_an_eval_run(tmp_path, monkeypatch, capsys):
    server = run_orchestrator(tmp_path, monkeypatch, eval_config())
    layout = TrainingRunLayout(tmp_path)
    lines = [json.loads(line) for line in layout.evals_path.read_text().splitlines()]
    assert [(line["step"], line["policy_step"]) for line in lines] == [(0, 0), (2, 2), (4, 4), (5, 5)]
    # the due steps were loaded although newer adapters were there (without evals: 5 at once)
    assert server.loaded == [0, 2, 4, 5]
    for line in lines:
        step = line["step"]
        run = load_run(layout.eval_run_dir(step, "tiny"))  # the eval engine's reader
        assert len(run.rows) == 6 and {r["rollout_idx"] for r in run.rows} == {0, 1}
        assert all(r["reward"] == step / 10 for r in run.rows)  # every rollout saw the adapter of its step
        entry = read_entry(layout.eval_run_dir(step, "tiny"))
        assert (entry.status, entry.num_examples, entry.rollouts_per_example) == ("completed", 3, 2)
        assert line["eval/tiny/reward/mean"] == entry.avg_reward == pytest.approx(step / 10)
        assert line["eval/tiny/num_rollouts"] == 6 and line["eval/tiny/reward/std"] == pytest.approx(0.0)
    assert {prompt for _, prompt in server.eval_prompts} == {f"held-out {i}" for i in range(3)}
    assert server.eval_beside_sampling and all(server.eval_beside_sampling)
    out = capsys.readouterr().out
    assert "eval step 2: tiny reward 0.200 ± 0.00 (6 rollouts, " in out
    stats = json.loads(layout.batch_stats_path(2).read_text())
    assert stats["wait_eval_s"] >= 0 and stats["policy_step"] == 2


def test_skip_eval_on_base_leaves_step_0_out(tmp_path, monkeypatch):
    run_orchestrator(tmp_path, monkeypatch, eval_config(max_steps=3, skip_eval_on_base=True))
    steps = [json.loads(line)["step"] for line in TrainingRunLayout(tmp_path).evals_path.read_text().splitlines()]
    assert steps == [2, 3]
    assert not TrainingRunLayout(tmp_path).eval_run_dir(0, "tiny").exists()


def test_the_trainer_copies_each_eval_into_the_next_metrics_row(tmp_path):
    cfg = eval_config()
    layout = TrainingRunLayout(tmp_path)
    log = MetricsLog(tmp_path, cfg)
    layout.evals_path.write_text(json.dumps({"step": 0, "policy_step": 0, "eval/tiny/reward/mean": 0.1}) + "\n")
    log.write({"step": 1, "loss": 0.0})
    log.write({"step": 2, "loss": 0.0})
    with layout.evals_path.open("a") as handle:
        handle.write(json.dumps({"step": 2, "policy_step": 2, "eval/tiny/reward/mean": 0.3}) + "\n")
    log.wait_for_eval(2)
    for step in (3, 4):  # two evals ending between two rows: one row each, oldest first
        with layout.evals_path.open("a") as handle:
            handle.write(json.dumps({"step": step, "policy_step": step, "eval/tiny/reward/mean": step / 10}) + "\n")
    log.write({"step": 3, "loss": 0.0})
    log.write({"step": 4, "loss": 0.0})
    for step in (5, 6):  # the last row takes the run's final eval
        with layout.evals_path.open("a") as handle:
            handle.write(json.dumps({"step": step, "policy_step": step, "eval/tiny/reward/mean": step / 10}) + "\n")
    log.write({"step": 6, "loss": 0.0}, last=True)
    rows = [json.loads(line) for line in layout.metrics_path.read_text().splitlines()]
    assert (rows[0]["eval/tiny/reward/mean"], rows[0]["eval/step"]) == (0.1, 0)
    assert "eval/step" not in rows[1]
    assert [row["eval/step"] for row in rows[2:]] == [2, 3, 6]
    assert rows[3]["eval/tiny/reward/mean"] == 0.3 and rows[4]["eval/tiny/reward/mean"] == 0.6


def test_the_trainer_keeps_the_adapters_of_the_evaluated_steps(tmp_path):
    from prime_lora.trainer.checkpoint import prune_weights

    layout = TrainingRunLayout(tmp_path)
    for step in range(7):
        layout.weights_dir(step).mkdir(parents=True)
    prune_weights(tmp_path, max_async_level=1, keep={3})
    assert layout.weight_steps() == [0, 3, 5, 6]
