"""The SFT orchestrator (orchestrator/sft_loop.py, sft_batches.py): sources mixed by ratio, a seeded order per
epoch that a resume continues exactly, batches paced by the trainer's weights, and a data set with no usable
row stopped in one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sft_tiny import tiny_tokenizer  # noqa: E402

from prime_cli.train.config import RLConfig
from prime_lora.orchestrator import sft_loop
from prime_lora.orchestrator.loop import StepFault
from prime_lora.orchestrator.sft_batches import SftBatches, SourceSamples, shares


def rows(name: str, count: int) -> SourceSamples:
    return SourceSamples(name, [{"input_ids": [i], "loss_mask": [1], "env": name} for i in range(count)], 1.0)


def ids(batch) -> list[tuple]:
    return [(s["env"], s["input_ids"][0]) for s in batch]


def test_shares_follow_the_ratios_and_fill_the_batch():
    assert shares(8, [1.0]) == [8]
    assert shares(8, [3.0, 1.0]) == [6, 2]
    assert shares(5, [1.0, 1.0]) == [3, 2]
    assert sum(shares(7, [0.2, 0.5, 0.3])) == 7


def test_each_epoch_is_every_row_once_in_a_new_seeded_order():
    batches = SftBatches([rows("a", 6)], 3, seed=1, shuffle=True)
    epochs = [ids(batches.next_batch()) + ids(batches.next_batch()) for _ in range(3)]
    assert all(sorted(e) == [("a", i) for i in range(6)] for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3  # reshuffled each epoch
    again = SftBatches([rows("a", 6)], 3, seed=1, shuffle=True)
    assert ids(again.next_batch()) == epochs[0][:3]
    plain = SftBatches([rows("a", 4)], 3, seed=1, shuffle=False)
    assert ids(plain.next_batch()) + ids(plain.next_batch()) == [("a", i) for i in [0, 1, 2, 3, 0, 1]]
    assert plain.epoch == 1.5 and plain.steps_per_epoch() == 4 / 3


def test_a_restored_state_continues_the_straight_order_exactly():
    straight = SftBatches([rows("a", 5), rows("b", 3)], 4, seed=7, shuffle=True)
    expected = [ids(straight.next_batch()) for _ in range(6)]
    first = SftBatches([rows("a", 5), rows("b", 3)], 4, seed=7, shuffle=True)
    head = [ids(first.next_batch()) for _ in range(2)]
    state = json.loads(json.dumps(first.state()))
    resumed = SftBatches([rows("a", 5), rows("b", 3)], 4, seed=7, shuffle=True)
    assert resumed.restore(state) == []
    assert head + [ids(resumed.next_batch()) for _ in range(4)] == expected
    assert all(sum(1 for env, _ in batch if env == "a") == 2 for batch in expected)  # ratio 1:1 of 4
    changed = SftBatches([rows("a", 6), rows("b", 3)], 4, seed=7, shuffle=True)
    assert changed.restore(state) == ["a"]


def sft_config(tmp_path: Path, data: str, **orchestrator) -> RLConfig:
    return RLConfig.model_validate({
        "max_steps": 3, "seq_len": 256, "output_dir": str(tmp_path / "out"),
        "orchestrator": {"batch_size": 2, "max_async_level": 1, **orchestrator,
                         "algo": {"type": "dataset_sft", "dataset": {"source": [{"dataset": data}]}}}})


CHAT = [{"role": "user", "content": "2+3?"}, {"role": "assistant", "content": "5"}]


def write_rows(path: Path, rows_: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows_))
    return path


def test_batches_wait_for_the_trainers_weights_and_carry_their_progress(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sft_loop, "load_tokenizer", lambda config: tiny_tokenizer())
    data = write_rows(tmp_path / "rows.jsonl", [{"messages": CHAT}] * 3 + [{"messages": CHAT[:1]}])
    config = sft_config(tmp_path, "rows.jsonl")
    out = Path(config.output_dir)

    async def scenario():
        task = asyncio.create_task(sft_loop.sft_steps(config, out, None, 0, tmp_path))
        await asyncio.sleep(1.0)
        assert not (out / "rollouts").exists()  # batch 1 needs the weights of step 0
        (out / "weights" / "step_0").mkdir(parents=True)
        await asyncio.sleep(1.0)
        assert sorted(p.name for p in (out / "rollouts").iterdir()) == ["step_1", "step_2"]  # async level 1
        (out / "weights" / "step_1").mkdir()
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())
    assert data.exists()
    stats = json.loads((out / "rollouts" / "step_3" / "stats.json").read_text())
    assert stats["samples"] == 2 and stats["sft_rows"] == 3 and stats["bad_rows"] == 1
    assert stats["epoch"] == pytest.approx(2.0) and stats["loss_tokens"] == 2 * 2  # "5" + the end token
    progress = json.loads((out / "rollouts" / "step_3" / "orchestrator.json").read_text())
    assert progress["step"] == 3 and progress["sft"]["sources"][0]["epoch"] == 2
    batch = [json.loads(line) for line in (out / "rollouts" / "step_1" / "batch.jsonl").read_text().splitlines()]
    assert len(batch) == 2 and batch[0]["advantage"] == 0.0 and batch[0]["env"] == "sft:rows.jsonl"
    printed = capsys.readouterr().out
    assert "data: 3 rows from rows.jsonl (1 row skipped: 1 no assistant turn)" in printed
    assert "an epoch of rows.jsonl is 1.5 steps" in printed


def test_no_usable_row_stops_in_one_line_naming_the_reasons(tmp_path, monkeypatch):
    monkeypatch.setattr(sft_loop, "load_tokenizer", lambda config: tiny_tokenizer())
    write_rows(tmp_path / "rows.jsonl", [{"messages": CHAT[:1]}, {"text": "x"}, {"messages": CHAT}])
    config = sft_config(tmp_path, "rows.jsonl", max_async_level=1)
    config.__dict__["seq_len"] = 16  # the one good row is longer
    with pytest.raises(StepFault) as stop:
        asyncio.run(sft_loop.sft_steps(config, Path(config.output_dir), None, 0, tmp_path))
    assert str(stop.value).startswith("no usable SFT rows in rows.jsonl (3 rows skipped: 1 longer than seq_len 16 "
                                      "(up to 24 tokens)")
    assert "1 missing column messages" in str(stop.value) and "1 no assistant turn" in str(stop.value)


def test_online_evals_load_each_due_adapter_into_the_runs_server_as_in_rl(tmp_path, monkeypatch):
    import prime_cli.envs as vf
    from prime_cli.train.plugin_api import TrainingRunLayout
    from prime_lora.orchestrator import weights
    from tests.support.scripted_server import ScriptedOpenAIServer

    loaded: list[int] = []
    monkeypatch.setattr(weights, "load_adapter", lambda url, name, path: loaded.append(int(path.name[5:])))
    monkeypatch.setattr(weights, "reset_prefix_cache", lambda url: True)
    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": ""}],
                           eval_dataset=[{"question": f"held-out {i}", "answer": ""} for i in range(2)],
                           rubric=vf.Rubric(funcs=[lambda completion: int(completion[-1]["content"].split()[-1]) / 10]))
    monkeypatch.setattr(vf, "load_environment", lambda env_id, **args: env)
    monkeypatch.setattr(sft_loop, "load_tokenizer", lambda config: tiny_tokenizer())
    write_rows(tmp_path / "rows.jsonl", [{"messages": CHAT}] * 3)
    config = sft_config(tmp_path, "rows.jsonl", eval={"interval": 2, "env": [{"id": "tiny"}]})
    out = Path(config.output_dir)
    for step in range(config.max_steps + 1):  # a trainer far ahead
        TrainingRunLayout(out).weights_dir(step).mkdir(parents=True)
    with ScriptedOpenAIServer(reply=lambda body: f"adapter {loaded[-1]}") as scripted:
        assert asyncio.run(sft_loop.run_sft(config, out, [scripted.url], None, base=tmp_path)) == 0
    lines = [json.loads(line) for line in TrainingRunLayout(out).evals_path.read_text().splitlines()]
    assert [(line["step"], line["policy_step"]) for line in lines] == [(0, 0), (2, 2), (3, 3)]
    assert [line["eval/tiny/reward/mean"] for line in lines] == pytest.approx([0.0, 0.2, 0.3])
    assert loaded == [0, 2, 3]
    assert len((out / "rollouts" / "step_3" / "batch.jsonl").read_text().splitlines()) == 2


def test_the_orchestrator_needs_a_base_url_only_when_it_samples_or_evaluates(tmp_path, monkeypatch, capsys):
    from prime_lora.orchestrator.__main__ import main

    monkeypatch.setattr(sft_loop, "load_tokenizer", lambda config: tiny_tokenizer())
    monkeypatch.chdir(tmp_path)
    write_rows(tmp_path / "rows.jsonl", [{"messages": CHAT}] * 2)
    config = sft_config(tmp_path, "rows.jsonl", max_async_level=5)
    path = tmp_path / "out" / "config.json"  # the orchestrator's output_dir is its config's folder
    (tmp_path / "out" / "weights" / "step_0").mkdir(parents=True)  # the trainer's untrained adapter
    path.write_text(config.model_dump_json())
    assert main(["--config", str(path)]) == 0
    assert len(list((tmp_path / "out" / "rollouts").iterdir())) == 3
    rl = RLConfig.model_validate({"orchestrator": {"batch_size": 4, "rollouts_per_example": 2,
                                                   "env": [{"id": "reverse-text"}]}})
    path.write_text(rl.model_dump_json())
    with pytest.raises(SystemExit) as usage:
        main(["--config", str(path)])
    assert usage.value.code == 2 and "--base-url is required" in capsys.readouterr().err
    path.write_text(sft_config(tmp_path, "gone.jsonl").model_dump_json())
    assert main(["--config", str(path)]) == 3
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("fatal: data.source dataset 'gone.jsonl'")
