"""The trainer's batch source: its loop driven from memory without an orchestrator, and the file-backed
source's wait (it names the file it waits for, and a timeout raises an error that names it)."""

from __future__ import annotations

import json
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_samples, tiny_config, tiny_model, write_batch  # noqa: E402

from prime_cli.train.plugin_api import TrainingRunLayout  # noqa: E402
from prime_lora.trainer.batch_source import Batch, BatchTimeout, FileBatches, MemoryBatches  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402


def test_the_loop_trains_on_batches_held_in_memory(tmp_path):
    out = tmp_path / "run"
    batches = MemoryBatches({1: make_samples(1), 2: Batch(make_samples(2), {"reward_mean": 0.75})})
    assert train(tiny_config(out), out, tiny_model(tmp_path / "tiny"), None, batches=batches) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["num_tokens"] > 0 and r["grad_norm"] > 0 for r in rows)
    assert "reward_mean" not in rows[0] and rows[1]["reward_mean"] == 0.75 and rows[1]["wait_batch_s"] == 0.0
    assert not (out / "rollouts").exists()  # no orchestrator, no batch files
    assert (out / "weights" / "step_2" / "adapter_model.safetensors").exists()
    with pytest.raises(LookupError, match="no batch for step 3 in memory"):
        batches.next_batch(3)


def test_waiting_for_a_batch_file_says_which_and_times_out_naming_it(tmp_path):
    said = []
    source = FileBatches(tmp_path, timeout_s=1.0, notice_every_s=0.1, say=said.append, poll_s=0.01)
    missing = TrainingRunLayout(tmp_path).batch_path(4)
    with pytest.raises(BatchTimeout, match="no batch for step 4 after 1 s") as raised:
        source.next_batch(4)
    assert str(missing) in str(raised.value)
    assert said and all(line.startswith(f"waiting for {missing} (") for line in said)


def test_a_batch_file_written_while_waiting_is_read(tmp_path):
    samples = make_samples(5)
    writer = threading.Timer(0.3, write_batch, (tmp_path, 1, samples))
    writer.start()
    batch = FileBatches(tmp_path, timeout_s=30, poll_s=0.01).next_batch(1)
    writer.join()
    assert batch.samples == samples and batch.stats == {"step": 1, "reward_mean": 0.5} and batch.waited_s > 0
