"""`prime train` of an SFT config whose data is not on this machine: refused in one line before anything starts
(a dry run says it in a note)."""

from __future__ import annotations

from .support import assert_one_error_line, run_train, write

CONFIG = """
max_steps = 2

[data]
seq_len = 256
batch_size = 2

[[data.source]]
dataset = "{dataset}"
"""


def test_a_missing_data_set_is_refused_in_one_line_before_anything_starts(tmp_path):
    config = write(tmp_path, CONFIG.format(dataset="missing/rows.jsonl"))
    result = run_train([str(config), "-o", str(tmp_path / "out")], cwd=tmp_path)
    assert_one_error_line(result, "data.source dataset 'missing/rows.jsonl': no such file or folder",
                          "nothing is downloaded", ".jsonl, .json or .parquet")
    assert not (tmp_path / "out").exists()
    dry = run_train([str(config), "--dry-run"], cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "a real run on this machine would refuse the data: data.source dataset 'missing/rows.jsonl'" in dry.stdout


def test_a_file_in_a_format_that_is_not_read_is_refused(tmp_path):
    (tmp_path / "rows.csv").write_text("prompt,completion\n")
    result = run_train([str(write(tmp_path, CONFIG.format(dataset="rows.csv"))), "-o", str(tmp_path / "out")],
                       cwd=tmp_path)
    assert_one_error_line(result, "a .csv file is not read; give a .jsonl")


def test_a_file_without_one_usable_row_is_refused_before_the_folder_is_touched(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"messages": [{"role": "user", "content": "no answer"}]}\n{"text": "x"}\n')
    result = run_train([str(write(tmp_path, CONFIG.format(dataset="rows.jsonl"))), "-o", str(tmp_path / "out")],
                       cwd=tmp_path)
    assert_one_error_line(result, "no usable row", "1 no assistant turn", "1 missing column messages")
    assert not (tmp_path / "out").exists()


def test_reward_filters_on_a_data_file_are_refused(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"prompt": "Q", "completion": "A"}\n')
    text = CONFIG.format(dataset="rows.jsonl") + "min_reward = 0.5\n"
    result = run_train([str(write(tmp_path, text)), "-o", str(tmp_path / "out")], cwd=tmp_path)
    assert_one_error_line(result, "min_reward and best_per_example filter the rollouts of saved eval runs",
                          "remove them")


def test_an_adapter_inside_the_runs_own_weights_is_refused(tmp_path):
    """A fresh start (or --force) clears OUT/weights/: an adapter there would be gone before the trainer loads it."""
    adapter = tmp_path / "out" / "weights" / "step_4"
    adapter.mkdir(parents=True)
    (tmp_path / "rows.jsonl").write_text('{"prompt": "Q", "completion": "A"}\n')
    text = CONFIG.format(dataset="rows.jsonl").replace("max_steps = 2", f'max_steps = 2\n[model]\nadapter = "{adapter}"')
    result = run_train([str(write(tmp_path, text)), "-o", str(tmp_path / "out"), "--force"], cwd=tmp_path)
    assert_one_error_line(result, "is inside weights/ of this run's output_dir", "-o DIR")
    assert adapter.is_dir()
