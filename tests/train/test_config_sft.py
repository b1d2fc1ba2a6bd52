"""The config of SFT, teacher rollouts, distillation and warm starts (config_sft.py): prime-rl's spellings land
on one RLConfig, and every contradiction is one line."""

from __future__ import annotations

import pytest

from prime_cli.train.errors import TrainConfigError
from prime_cli.train.loading import load_train_config
from tests.train.support import MINIMAL, assert_one_error_line, run_train, write

SFT_FILE = """
max_steps = 12
[model]
name = "local"
[data]
seq_len = 384
batch_size = 8
micro_batch_size = 4
shuffle = false
[[data.source]]
dataset = "rows.jsonl"
[[data.source]]
dataset = "runs/"
min_reward = 0.8
best_per_example = true
ratio = 0.5
"""


def load_error(tmp_path, text: str) -> str:
    with pytest.raises(TrainConfigError) as info:
        load_train_config(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message and "pydantic" not in message
    return message


def test_an_sft_run_ignores_adv_tau(tmp_path):
    assert load_train_config(write(tmp_path, SFT_FILE + "[trainer.loss]\nadv_tau = 0\n")).is_sft


def test_prime_rls_sft_file_lands_on_the_orchestrators_dataset_and_the_sft_loss(tmp_path):
    config = load_train_config(write(tmp_path, SFT_FILE))
    assert config.seq_len == 384 and config.orchestrator.batch_size == 8 and config.trainer.micro_batch_size == 4
    dataset = config.orchestrator.algo.dataset
    assert config.orchestrator.algo.type == "dataset_sft" and dataset.shuffle is False
    assert [s.dataset for s in dataset.source] == ["rows.jsonl", "runs/"]  # not on disk: kept as written
    assert dataset.source[1].min_reward == 0.8 and dataset.source[1].best_per_example and dataset.source[1].ratio == 0.5
    assert config.is_sft and config.trainer.loss.type == "sft" and not config.needs_inference
    assert config.output_dir == "outputs/sft/rows" and config.orchestrator.env == []


def test_an_existing_data_file_and_adapter_are_made_absolute(tmp_path):
    (tmp_path / "rows.jsonl").write_text("{}\n")
    (tmp_path / "adapter").mkdir()
    text = SFT_FILE.replace('name = "local"', 'name = "local"\nadapter = "adapter"')
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        config = load_train_config(write(tmp_path, text))
    finally:
        os.chdir(here)
    assert config.orchestrator.algo.dataset.source[0].dataset == str(tmp_path / "rows.jsonl")
    assert config.model.adapter == str(tmp_path / "adapter")


def test_an_sft_eval_needs_its_environments_and_starts_vllm(tmp_path):
    assert "needs its environments" in load_error(tmp_path, SFT_FILE + "[eval]\ninterval = 5\n")
    config = load_train_config(write(tmp_path, SFT_FILE + '[eval]\ninterval = 5\n[[eval.env]]\nid = "reverse-text"\n'))
    assert config.orchestrator.eval.env[0].id == "reverse-text" and config.needs_inference


def test_prime_rls_dataset_sft_inside_an_rl_file(tmp_path):
    config = load_train_config(write(tmp_path, """
        [orchestrator.algo]
        type = "dataset_sft"
        [orchestrator.algo.dataset]
        name = "rows.parquet"
        split = "test"
    """))
    assert config.orchestrator.from_data and config.orchestrator.algo.dataset.source[0].split == "test"
    assert config.is_sft


def test_teacher_rollouts_make_an_sft_run_on_the_environments(tmp_path):
    config = load_train_config(write(tmp_path, MINIMAL + """
        [orchestrator.teacher_rollout_model]
        min_reward = 0.5
        [orchestrator.teacher_rollout_model.client]
        base_url = "http://10.0.0.5:8000/v1"
        [orchestrator.teacher_rollout_model.model]
        name = "Qwen/Qwen3-32B"
    """))
    teacher = config.orchestrator.teacher_rollout_model
    assert config.is_sft and teacher.served_name == "Qwen/Qwen3-32B" and teacher.client.base_url == ["http://10.0.0.5:8000/v1"]
    assert config.output_dir == "outputs/sft/reverse-text"
    assert not config.needs_inference  # the teacher samples on its own server


def test_distillation_needs_a_teacher_and_a_teacher_needs_teacher_tau(tmp_path):
    assert "teacher_tau > 0 needs a teacher" in load_error(tmp_path, MINIMAL + "[trainer.loss]\nteacher_tau = 1.0\n")
    assert "only with trainer.loss.teacher_tau > 0" in load_error(
        tmp_path, MINIMAL + '[orchestrator.teacher_model]\nadapter = "sft"\n')
    config = load_train_config(write(tmp_path, MINIMAL + '[trainer.loss]\nteacher_tau = 0.5\nadv_tau = 0\n'
                                                         '[orchestrator.teacher_model]\nadapter = "sft"\n'))
    assert config.orchestrator.teacher_model.served_name == "teacher" and config.trainer.loss.adv_tau == 0
    assert not config.is_sft


@pytest.mark.parametrize("text, fragment", [
    (MINIMAL + "[trainer.loss]\nadv_tau = 0\n", "leaves nothing to learn from"),
    (SFT_FILE + '[trainer.loss]\ntype = "rl"\n', 'cannot train on SFT data'),
    (MINIMAL + '[trainer.loss]\ntype = "sft"\n', "needs something to imitate"),
    (SFT_FILE.replace("shuffle = false", "epochs = 3"), "unknown key data.epochs"),
    (SFT_FILE + '[orchestrator.teacher_rollout_model]\nadapter = "a"\n', "not both"),
    (MINIMAL + '[trainer.loss]\nteacher_tau = 1\n[orchestrator.teacher_model]\nadapter = "a"\n'
               '[orchestrator.teacher_model.model]\nname = "x"\n', "keep one"),
    (MINIMAL + '[trainer.loss]\nteacher_tau = 1\n[orchestrator.teacher_model]\nmin_reward = 1\n', "a teacher needs a model"),
    (MINIMAL + '[trainer.loss]\nteacher_tau = 1\n[orchestrator.teacher_model]\nadapter = "a"\n'
               '[orchestrator.sampling]\ntemperature = 0.6\ntop_p = 0.9\n', "sets temperature = 0.6, top_p = 0.9"),
    (MINIMAL + '[trainer.loss]\nteacher_tau = 1\nadv_tau = 0\n[orchestrator.teacher_model]\nadapter = "a"\n'
               '[orchestrator.buffer]\nonline_difficulty_filtering = true\n', "turn the filtering off"),
    (SFT_FILE + "[trainer.loss]\nteacher_tau = 1\n", "an SFT run (a data set or a teacher's rollouts) imitates"),
    (SFT_FILE.replace("ratio = 0.5", "ratio = 0.05"), "under one row of a batch of 8"),
])
def test_contradictions_are_one_line(tmp_path, text, fragment):
    assert fragment in load_error(tmp_path, text)


def test_an_sft_dry_run_plans_no_vllm_and_the_sft_loss(tmp_path):
    result = run_train(["configs/sft/reverse-text-cpu.toml", "--dry-run"])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "are not used" not in out and "is not used" not in out
    assert "inference     none" in out and "SFT data: " in out and "reverse-text-train.jsonl" in out
    assert "loss: cross-entropy on the assistant tokens (SFT)" in out and "nothing was started" in out
    assert "note: data: 500 rows from " in out  # the rows the source gives, read (not tokenised) by the dry run


def test_a_bad_sft_file_is_one_line_through_the_cli(tmp_path):
    path = write(tmp_path, SFT_FILE + '[trainer.loss]\ntype = "rl"\n')
    assert_one_error_line(run_train([str(path), "--dry-run"]), "cannot train on SFT data")


def test_rl_keys_in_an_sft_file_are_named_as_unused(tmp_path):
    from prime_cli.train.loading import config_notes

    config = load_train_config(write(tmp_path, SFT_FILE + '[orchestrator]\nrollouts_per_example = 4\n'
                                                          '[[orchestrator.env]]\nid = "reverse-text"\n'))
    (note,) = config_notes(config)
    assert "orchestrator.env, orchestrator.rollouts_per_example are not used" in note
    plain = load_train_config(write(tmp_path, SFT_FILE))
    assert config_notes(plain) == []
    # as `prime train` checks it: re-validated from a full dump (every key in model_fields_set)
    assert config_notes(type(plain).model_validate(plain.model_dump())) == []
