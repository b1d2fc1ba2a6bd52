"""[wandb.log_extras]: the orchestrator's extras.json of a scripted run, logged by the trainer's MetricsLog to an
offline W&B run and read back (no vLLM, no model)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lora_tiny import tiny_config
from test_wandb_run import isolated_wandb, offline_runs  # noqa: F401 - the fixture isolates wandb here too
from wandb_records import history

from prime_cli.train.config import RLConfig
from prime_cli.train.plugin_api import TrainingRunLayout
from prime_lora.orchestrator import loop
from prime_lora.orchestrator.sampler import EnvRows
from prime_lora.orchestrator.wandb_extras import COLUMNS, cut, sft_extras
from prime_lora.trainer.loop import MetricsLog

LONG = "word " * 200  # 1000 characters: cut by max_chars = 300


class TextEnv:
    """Groups of 4: rollout i has reward i / 4 and a completion naming it; rollout 0 of example 5 errors."""

    async def run_group(self, client, model, row, n, sampling_args):
        states = []
        for i in range(n):
            failed = row["example_id"] == 5 and i == 0
            states.append({
                "prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"q{row['example_id']} {LONG}"}],
                "completion": [{"role": "assistant", "content": f"answer {i}"}],
                "reward": i / n, "usage": {"completion_tokens": 3}, "is_truncated": False,
                "error": {"type": "ToolTimeout", "message": "the tool took too long"} if failed else None,
                "trajectory": [{"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5, i],
                                "completion_logprobs": [-0.1, -0.2, -0.3]}]})
        return states


def rl_config(out: Path, **extras) -> RLConfig:
    return RLConfig.model_validate({"max_steps": 4, "seed": 7, "output_dir": str(out), "orchestrator": {
        "batch_size": 16, "rollouts_per_example": 4, "env": [{"id": "scripted"}]},
        "wandb": {"project": "p", "log_extras": {"interval": 2, "max_rows": 3, "max_chars": 300, **extras}}})


def run_orchestrator(out: Path, cfg: RLConfig, monkeypatch) -> None:
    class Weights:
        loaded, last_load_s = 0, 0.0

        async def ensure(self, min_step):
            return 0.0

    rows = [{"example_id": i} for i in range(8)]
    monkeypatch.setattr(loop, "load_env_rows", lambda config: [EnvRows("scripted", TextEnv(), rows, 1.0)])
    monkeypatch.setattr(loop, "PolicyWeights", lambda *args: Weights())
    assert asyncio.run(loop.run(cfg, out, "http://127.0.0.1:9/v1", None)) == 0


def extras_of(out: Path, step: int) -> dict:
    return json.loads(TrainingRunLayout(out).batch_extras_path(step).read_text())


def test_the_orchestrator_writes_a_few_seeded_rows_on_the_interval_steps_errors_first(tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_orchestrator(out, rl_config(out), monkeypatch)
    layout = TrainingRunLayout(out)
    assert [s for s in range(1, 5) if layout.batch_extras_path(s).exists()] == [2, 4]
    for step in (2, 4):
        extras = extras_of(out, step)
        assert extras["columns"] == COLUMNS == ["step", "env", "example_id", "prompt", "completion", "reward",
                                                "advantage", "error"]
        assert len(extras["rows"]) == 3  # max_rows, of the step's 16 rollouts
        for row in extras["rows"]:
            record = dict(zip(COLUMNS, row, strict=True))
            assert record["step"] == step and record["env"] == "scripted"
            assert record["prompt"].startswith(f"system: be brief\n\nuser: q{record['example_id']} word")
            assert len(record["prompt"]) <= 300 and "characters cut" in record["prompt"]
            rollout = 0 if record["error"] else int(record["reward"] * 4)  # the errored one is rollout 0
            assert record["completion"] == f"assistant: answer {rollout}"
        # the batch's 16 rollouts: rewards 0, .25, .5, .75 in each group, advantages centred
        rewards = extras["distributions"]["reward"]
        assert 15 <= len(rewards) <= 16 and set(rewards) == {0.0, 0.25, 0.5, 0.75}  # 16, less an errored one
        assert sum(extras["distributions"]["advantage"]) == pytest.approx(0)
    # example 5 (drawn at step 2 or 4) has an errored rollout: the table shows it with its error, no advantage
    errored = [dict(zip(COLUMNS, r, strict=True)) for s in (2, 4) for r in extras_of(out, s)["rows"]
               if r[COLUMNS.index("error")]]
    for step in (2, 4):  # both steps sampled example 5: one of 16 rollouts errored, and it has a row
        assert sum(1 for r in extras_of(out, step)["rows"] if r[COLUMNS.index("error")]) == 1
    assert errored and all(e["error"] == "ToolTimeout: the tool took too long" for e in errored)
    assert all(e["example_id"] == "5" and e["reward"] is None and e["advantage"] is None for e in errored)
    trained = [dict(zip(COLUMNS, r, strict=True)) for r in extras_of(out, 2)["rows"] if not r[COLUMNS.index("error")]]
    for row in trained:  # reward minus the group's mean (0.375 for a full group)
        assert row["advantage"] == pytest.approx(row["reward"] - 0.375) or row["example_id"] == "5"
    # the progress the checkpoint keeps holds no texts
    assert "rollout_log" not in layout.orchestrator_progress(4).read_text()
    # seeded: the same run draws the same rows; another seed, other rows
    again = tmp_path / "again"
    run_orchestrator(again, rl_config(again), monkeypatch)
    assert extras_of(again, 2)["rows"] == extras_of(out, 2)["rows"]
    other = tmp_path / "other"
    run_orchestrator(other, rl_config(other).model_copy(update={"seed": 8}), monkeypatch)
    assert [extras_of(other, s)["rows"] for s in (2, 4)] != [extras_of(out, s)["rows"] for s in (2, 4)]


def test_sample_ratio_and_switches_bound_what_is_written(tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_orchestrator(out, rl_config(out, sample_ratio=0.125, max_rows=100, distributions=False), monkeypatch)
    extras = extras_of(out, 2)
    assert len(extras["rows"]) == 2 and "distributions" not in extras  # 0.125 of 16 rollouts
    off = tmp_path / "off"
    run_orchestrator(off, rl_config(off, samples=False, distributions=False), monkeypatch)
    assert not list((off / "rollouts").glob("step_*/extras.json"))


def test_without_log_extras_no_file_and_no_texts_kept(tmp_path, monkeypatch):
    out = tmp_path / "out"
    cfg = rl_config(out)
    cfg.wandb.log_extras = None
    run_orchestrator(out, cfg, monkeypatch)
    assert not list((out / "rollouts").glob("step_*/extras.json"))


def test_the_trainer_logs_the_table_and_histograms_at_those_steps(tmp_path, monkeypatch):
    out = tmp_path / "out"
    cfg = rl_config(out)
    run_orchestrator(out, cfg, monkeypatch)
    log = MetricsLog(out, cfg)
    for step in range(1, 5):
        log.write({"step": step, "reward_mean": 0.375})
    log.close()
    (run_dir,) = offline_runs(out)
    logged = dict(history(run_dir))
    assert [s for s in logged if "samples/_type" in logged[s]] == [2, 4]
    for step in (2, 4):
        table = under(logged[step], "samples")
        assert table["_type"] == "table-file" and (table["nrows"], table["ncols"]) == (3, len(COLUMNS))
        saved = json.loads((run_dir / "files" / table["path"]).read_text())
        assert saved["columns"] == COLUMNS and saved["data"] == extras_of(out, step)["rows"]
        rewards = under(logged[step], "distributions/reward")
        assert rewards["_type"] == "histogram" and sum(rewards["values"]) == len(extras_of(out, step)["distributions"]["reward"])
        assert under(logged[step], "distributions/advantage")["_type"] == "histogram"
    assert logged[3]["reward/mean"] == 0.375 and not under(logged[3], "samples")


def under(items: dict, prefix: str) -> dict:
    """The fields of a logged object (the history holds them as PREFIX/field keys)."""
    return {key[len(prefix) + 1:]: value for key, value in items.items() if key.startswith(prefix + "/")}


def test_an_unreadable_extras_file_costs_its_step_only(tmp_path, capfd):
    out = tmp_path / "out"
    out.mkdir()
    path = TrainingRunLayout(out).batch_extras_path(1)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    log = MetricsLog(out, tiny_config(out, wandb={"project": "p", "log_extras": {"interval": 1}}))
    log.write({"step": 1, "reward_mean": 0.5})
    log.close()
    (run_dir,) = offline_runs(out)
    assert history(run_dir)[0][1]["reward/mean"] == 0.5
    assert "the W&B extras in" in capfd.readouterr().err


class CharTokenizer:
    def decode(self, ids):
        return "".join(chr(ord("a") + i) for i in ids)


def test_sft_rows_are_decoded_samples_without_reward_or_advantage():
    cfg = tiny_config(Path("."), wandb={"project": "p", "log_extras": {"max_rows": 2, "max_chars": 100}})
    samples = [{"input_ids": [0, 1, 2, 3, 4], "loss_mask": [0, 0, 1, 1, 1], "env": "sft:data.jsonl"}
               for _ in range(5)]
    extras = sft_extras(3, samples, CharTokenizer(), cfg)
    assert extras["columns"] == COLUMNS and "distributions" not in extras
    assert extras["rows"] == [[3, "sft:data.jsonl", "", "ab", "cde", None, None, None]] * 2


def test_cut_keeps_head_and_tail_within_the_bound():
    text = "A" * 500 + "Z" * 500
    short = cut(text, 200)
    assert len(short) == 200 and short.startswith("A") and short.endswith("Z") and "characters cut" in short
    assert cut("small", 200) == "small"


def test_an_sft_run_writes_decoded_rows_on_its_interval_steps(tmp_path, monkeypatch):
    from sft_tiny import tiny_tokenizer
    from test_sft_loop import CHAT, sft_config, write_rows

    from prime_lora.orchestrator import sft_loop

    monkeypatch.setattr(sft_loop, "load_tokenizer", lambda config: tiny_tokenizer())
    write_rows(tmp_path / "rows.jsonl", [{"messages": CHAT}] * 3)
    cfg = sft_config(tmp_path, "rows.jsonl").model_copy(update={"max_steps": 2})
    cfg.wandb = RLConfig.model_validate({**cfg.model_dump(), "wandb": {"log_extras": {"interval": 2}}}).wandb
    out = Path(cfg.output_dir)
    for step in (0, 1):  # the trainer's weights the batches wait for
        (out / "weights" / f"step_{step}").mkdir(parents=True)
    asyncio.run(sft_loop.sft_steps(cfg, out, None, 0, tmp_path))
    assert [p.parent.name for p in sorted((out / "rollouts").glob("step_*/extras.json"))] == ["step_2"]
    extras = extras_of(out, 2)
    assert len(extras["rows"]) == 2 and "distributions" not in extras  # the batch's 2 samples
    for row in extras["rows"]:
        record = dict(zip(COLUMNS, row, strict=True))
        assert "2+3?" in record["prompt"] and record["completion"].startswith("5")
        assert (record["env"], record["reward"], record["advantage"], record["error"]) == \
            ("sft:rows.jsonl", None, None, None)


def test_an_sft_table_with_empty_columns_and_a_bad_file_never_stop_the_log(tmp_path, capfd):
    out = tmp_path / "out"
    layout = TrainingRunLayout(out)
    for step, extras in ((1, {"step": 1, "columns": COLUMNS, "rows": [[1, "sft:d", "", "p", "c", None, None, None]]}),
                         (2, {"step": 2, "columns": ["a"], "rows": [[1, 2]]})):  # a row wider than its columns
        layout.rollouts_dir(step).mkdir(parents=True)
        layout.batch_extras_path(step).write_text(json.dumps(extras))
    log = MetricsLog(out, tiny_config(out, wandb={"project": "p", "log_extras": {"interval": 1}}))
    log.write({"step": 1, "loss": 1.0})
    log.write({"step": 2, "loss": 0.5})
    log.close()
    (run_dir,) = offline_runs(out)
    logged = dict(history(run_dir))
    assert under(logged[1], "samples")["nrows"] == 1 and logged[2]["trainer/loss"] == 0.5
    assert "step 2: the W&B extras could not be built" in capfd.readouterr().err


def test_the_surplus_buffer_saves_no_texts():
    from prime_lora.orchestrator.buffer import SurplusGroups
    from prime_lora.orchestrator.wandb_extras import RolloutRecord

    buffer = SurplusGroups()
    buffer.add(loop.Group(env="e", example_id=1, rewards=[0.0, 1.0], samples=[[], []],
                          rollout_log=[RolloutRecord("p", "c", 0.0, 0, None)]))
    state = json.loads(json.dumps(buffer.state()))
    assert "rollout_log" not in state[0] and state[0]["rewards"] == [0.0, 1.0]
    again = SurplusGroups()
    again.restore(state)
    assert again.groups[0].rollout_log == [] and again.groups[0].example_id == 1


def test_the_real_orchestrator_against_the_scripted_server_writes_the_chats_texts(tmp_path, monkeypatch):
    """States as an environment really makes them: prompt and completion are the chat's messages."""
    import prime_cli.envs as vf
    from prime_lora.orchestrator.__main__ import main
    from tests.support.scripted_server import ScriptedOpenAIServer

    def graded(completion) -> float:
        return 1.0 if completion and completion[-1]["content"] == "good" else 0.0

    env = vf.SingleTurnEnv(dataset=[{"question": f"question {i}", "answer": ""} for i in range(4)],
                           rubric=vf.Rubric(funcs=[graded]), system_prompt="answer in one word")
    monkeypatch.setattr(loop, "load_env_rows", lambda cfg: [EnvRows("tiny", env, env.get_dataset(), 1.0)])

    class LoadedWeights:
        loaded, last_load_s, last_before_load_s = 0, 0.0, 0.0

        async def ensure(self, min_step, **kwargs):
            return 0.0

    monkeypatch.setattr(loop, "PolicyWeights", lambda *args: LoadedWeights())
    replies = iter(["good", "bad"] * 8)
    cfg = RLConfig.model_validate({"max_steps": 2, "orchestrator": {
        "batch_size": 4, "rollouts_per_example": 4, "env": [{"id": "tiny"}]},
        "wandb": {"log_extras": {"interval": 1, "max_rows": 2}}})
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    with ScriptedOpenAIServer(lambda body: next(replies), token_ids=True) as policy:
        assert main(["--config", str(path), "--base-url", policy.url]) == 0
    for step in (1, 2):
        rows = [dict(zip(COLUMNS, r, strict=True)) for r in extras_of(tmp_path, step)["rows"]]
        assert len(rows) == 2
        for row in rows:
            assert row["prompt"] == f"system: answer in one word\n\nuser: question {row['example_id']}"
            assert row["completion"] in ("assistant: good", "assistant: bad")
            assert row["reward"] == (1.0 if row["completion"] == "assistant: good" else 0.0)
            assert row["advantage"] == pytest.approx(row["reward"] - 0.5) and row["error"] is None
        assert sorted(extras_of(tmp_path, step)["distributions"]["reward"]) == [0.0, 0.0, 1.0, 1.0]
