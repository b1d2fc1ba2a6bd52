"""run_dir.prepare: a fresh start deletes only what a prime run wrote (or exactly what --force lists),
a resume is checked whole before it rewinds anything, and one run at a time holds a folder."""

from __future__ import annotations

import json
import multiprocessing
import os
import re

import pytest
from run_folders import rl_config, write_run

from prime_cli.train.plugin_api import TrainingRunLayout, write_manifest
from prime_lora import run_dir


def tree(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_fresh_start_refuses_folders_it_did_not_write_and_touches_nothing(tmp_path):
    out = tmp_path / "d"
    (out / "checkpoints" / "step_1000").mkdir(parents=True)
    (out / "checkpoints" / "step_1000" / "model.bin").write_text("weights")
    (out / "evals" / "important").mkdir(parents=True)
    (out / "evals" / "important" / "results.jsonl").write_text("{}\n")
    before = tree(out)
    with pytest.raises(run_dir.RunDirError) as refused:
        run_dir.prepare(rl_config(out), out, None)
    message = str(refused.value)
    assert "checkpoints/" in message and "-o DIR" in message and "--force" in message
    assert "evals/" not in message  # prime eval run's folder name is not one a training run writes
    assert tree(out) == before  # no lock file, no manifest, nothing deleted


def test_force_deletes_exactly_the_listed_entries(tmp_path):
    out = tmp_path / "d"
    (out / "checkpoints" / "step_1000").mkdir(parents=True)
    (out / "logs").mkdir()
    (out / "logs" / "mine.log").write_text("x")
    (out / "evals" / "important").mkdir(parents=True)
    (out / "notes.txt").write_text("keep")
    prepared = run_dir.prepare(rl_config(out), out, None, force=True)
    prepared.lock.release()
    assert not (out / "checkpoints").exists() and not (out / "logs").exists()
    assert (out / "evals" / "important").is_dir() and (out / "notes.txt").read_text() == "keep"
    assert (out / "prime-train.json").is_file() and (out / "config.json").is_file()


def test_an_untrained_start_of_a_prime_run_is_cleared_without_asking(tmp_path):
    out = tmp_path / "d"
    write_manifest(TrainingRunLayout(out))
    (out / "logs").mkdir()
    (out / "logs" / "inference.log").write_text("an aborted start")
    (out / "weights" / "step_0").mkdir(parents=True)
    (out / "notes.txt").write_text("keep")
    run_dir.prepare(rl_config(out), out, None).lock.release()
    assert not (out / "logs").exists() and not (out / "weights").exists() and (out / "notes.txt").exists()


def test_a_trained_run_is_refused_with_its_resume_command(tmp_path):
    out = tmp_path / "d"
    config = write_run(out, 6, checkpoints=(5, 6))
    with pytest.raises(run_dir.RunDirError, match=r"trained up to step 6.*--resume-step 6"):
        run_dir.prepare(config, out, None)


@pytest.mark.parametrize(("key", "value"), [("trainer.model.lora.rank", 16), ("trainer.model.lora.alpha", 8.0),
                                            ("trainer.model.lora.target_modules", ["q_proj"]),
                                            ("model.name", "/models/other")])
def test_a_resume_whose_config_cannot_load_the_checkpoint_is_refused_with_nothing_deleted(tmp_path, key, value):
    out = tmp_path / "d"
    write_run(out, 6, checkpoints=(5, 6))
    before, saved = tree(out), (out / "config.json").read_text()
    with pytest.raises(run_dir.RunDirError, match=key.replace(".", r"\.")):
        run_dir.prepare(rl_config(out, max_steps=6, **{key: value}), out, 5)
    assert tree(out) == before and (out / "config.json").read_text() == saved


def test_a_truncated_checkpoint_file_is_named_with_the_last_whole_step(tmp_path):
    out = tmp_path / "d"
    config = write_run(out, 6, checkpoints=(3, 6))
    optimizer = out / "checkpoints" / "step_6" / "trainer" / "optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes()[:100])
    before = tree(out)
    with pytest.raises(run_dir.RunDirError, match=r"optimizer\.pt is truncated.*--resume-step 3"):
        run_dir.prepare(config, out, 6)
    adapter = out / "checkpoints" / "step_3" / "trainer" / "adapter_model.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:-4])
    with pytest.raises(run_dir.RunDirError, match=r"adapter_model\.safetensors is truncated.*start a new run"):
        run_dir.prepare(config, out, 3)
    assert tree(out) == before


@pytest.mark.parametrize(("header", "why"), [
    ([1, 2], "not a JSON object"),
    ({"w": {"dtype": "F32", "shape": [1]}}, "entry without valid data_offsets ('w')"),
    ({"w": {"dtype": "F32", "shape": [1], "data_offsets": "0-4"}}, "entry without valid data_offsets ('w')"),
    ({"w": [0, 4]}, "entry without valid data_offsets ('w')"),
])
def test_a_safetensors_header_of_the_wrong_shape_is_named_with_the_last_whole_step(tmp_path, header, why):
    out = tmp_path / "d"
    config = write_run(out, 6, checkpoints=(3, 6))
    raw = json.dumps(header).encode()  # valid JSON, not the {name: {dtype, shape, data_offsets}} safetensors holds
    adapter = out / "checkpoints" / "step_6" / "trainer" / "adapter_model.safetensors"
    adapter.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(run_dir.RunDirError, match=rf"adapter_model\.safetensors has .*{re.escape(why)}.*--resume-step 3"):
        run_dir.prepare(config, out, 6)


def test_a_safe_change_is_noted_and_waits_in_a_pending_config(tmp_path):
    out = tmp_path / "d"
    write_run(out, 6, checkpoints=(5, 6))
    saved = (out / "config.json").read_text()
    new = rl_config(out, max_steps=10, **{"trainer.optim.lr": 3e-4})
    prepared = run_dir.prepare(new, out, 5)
    prepared.lock.release()
    assert prepared.notes == ["note: resuming with max_steps changed: 6 -> 10",
                              "note: resuming with trainer.optim.lr changed: 0.0001 -> 0.0003"]
    assert prepared.config_path.name == "config.pending.json"
    assert (out / "config.json").read_text() == saved  # rewritten only once the run is under way
    assert json.loads(prepared.config_path.read_text())["max_steps"] == 10
    assert TrainingRunLayout(out).weight_steps() == [0, 1, 2, 3, 4, 5]


def test_resuming_at_the_last_step_asks_for_more_steps(tmp_path):
    out = tmp_path / "d"
    config = write_run(out, 6, checkpoints=(6,))
    with pytest.raises(run_dir.RunDirError, match=r"max_steps \(6\) must be above the step resumed from \(6\)"):
        run_dir.prepare(config, out, 6)


def _hold_lock(out, ready, done):
    prepared = run_dir.prepare(rl_config(out), out, None)
    ready.set()
    done.wait(30)
    prepared.lock.release()


def test_one_run_per_folder_and_a_dead_holder_blocks_nothing(tmp_path):
    out = tmp_path / "d"
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_lock, args=(out, ready, done))
    holder.start()
    assert ready.wait(30)
    with pytest.raises(run_dir.RunDirError, match=rf"in use by another prime train \(PID {holder.pid}"):
        run_dir.prepare(rl_config(out), out, None, force=True)
    assert (out / "config.json").exists()  # the holder's, untouched by the refused run
    os.kill(holder.pid, 9)  # SIGKILL: the kernel drops the lock
    holder.join()
    assert (out / "train.lock").exists()
    run_dir.prepare(rl_config(out), out, None).lock.release()


def test_target_modules_in_another_order_are_the_same_lora(tmp_path):
    out = tmp_path / "d"
    write_run(out, 6, checkpoints=(5, 6))
    modules = ["v_proj", "q_proj", "k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    prepared = run_dir.prepare(rl_config(out, max_steps=6, **{"trainer.model.lora.target_modules": modules}), out, 5)
    prepared.lock.release()
    assert prepared.notes == []


def test_the_refusal_of_a_finished_run_names_a_resume_that_works(tmp_path):
    out = tmp_path / "d"
    config = write_run(out, 6, checkpoints=(6,))
    with pytest.raises(run_dir.RunDirError, match=r"--resume-step 6 --set max_steps=16`"):
        run_dir.prepare(config, out, None)


def test_a_users_own_metrics_file_is_not_called_a_training_run(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / "metrics.jsonl").write_text("mine\n")
    with pytest.raises(run_dir.RunDirError) as refused:
        run_dir.prepare(rl_config(out), out, None)
    assert "no prime training run wrote: metrics.jsonl" in str(refused.value)
    assert "already holds a training run" not in str(refused.value)


def test_dry_run_warns_of_what_a_resume_would_refuse(tmp_path):
    from prime_cli.train.folder_notes import output_dir_notes

    out = tmp_path / "d"
    write_run(out, 6, checkpoints=(5, 6))
    (notes,) = output_dir_notes(rl_config(out, max_steps=8, **{"trainer.model.lora.rank": 16}), 5)
    assert notes.startswith("warning: a real run would refuse to resume: ") and "trainer.model.lora.rank" in notes
    assert output_dir_notes(rl_config(out, max_steps=8), 5) == ["note: resuming with max_steps changed: 6 -> 8"]


def test_the_plugins_run_dir_error_is_prime_s_one_run_dir_error():
    from prime_cli.envs.errors import UserInputError
    from prime_cli.train import plugin_api

    assert run_dir.RunDirError is plugin_api.RunDirError
    assert issubclass(run_dir.RunDirError, UserInputError)  # one line, exit code 2, wherever it is raised
