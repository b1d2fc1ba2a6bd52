"""The plugin's readers of run files keep prime's one torn-line rule (issue 56): a torn last line is left
out, any other bad line is an error naming file:line (the live view and the resume rewind dropped it
silently; a batch's raised a bare JSONDecodeError)."""

from __future__ import annotations

import json

import pytest
from run_folders import write_run

from prime_cli.train.plugin_api import JsonLinesError
from prime_lora import run_dir
from prime_lora.progress import MetricsTail


def test_the_live_view_names_a_bad_line_and_counts_lines_across_reads(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n\n')
    tail = MetricsTail(path)
    assert tail.poll() == [{"step": 1}]
    with open(path, "a") as handle:
        handle.write('{"step": 2}\n{"step": 3, "rew\n{"step": 4}\n')
    with pytest.raises(JsonLinesError, match=r"metrics\.jsonl:4: "):
        tail.poll()


def test_a_resume_refuses_a_bad_middle_line_before_changing_anything(tmp_path):
    out = tmp_path / "out"
    cfg = write_run(out, 3, checkpoints=(2,))
    lines = (out / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join([lines[0], '{"step": 2, "rew', *lines[1:]]) + "\n")
    with pytest.raises(run_dir.RunDirError, match=r"metrics\.jsonl:2: "):
        run_dir.prepare(cfg, out, 2)
    assert run_dir.steps_in(out / "weights") == [0, 1, 2, 3] and run_dir.steps_in(out / "rollouts") == [1, 2, 3]
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 4, "rew')  # torn: left out
    run_dir.prepare(cfg, out, 2).lock.release()
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_a_batch_names_a_bad_line_and_leaves_out_a_torn_last_one(tmp_path):
    pytest.importorskip("torch")
    from prime_lora.trainer.batches import read_batch

    path = tmp_path / "batch.jsonl"
    sample = {"input_ids": [1, 2], "loss_mask": [0, 1], "inference_logprobs": [0.0, -0.5], "advantage": 1.0}
    path.write_text(json.dumps(sample) + "\n[1]\n" + json.dumps(sample) + "\n")
    with pytest.raises(JsonLinesError, match=r"batch\.jsonl:2: "):
        read_batch(path)
    path.write_text(json.dumps(sample) + "\n" + json.dumps(sample)[:10])
    assert read_batch(path) == [sample]
