"""The alias table (prime_cli/train/config_aliases.py), key by key: each spelling the guides use lands on
the key with the documented meaning, and the keys that cannot apply here fail with one line."""

import pytest

from prime_cli.train.config_aliases import ALIASES, normalize, translate_override_key
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.loading import config_notes, load_train_config
from tests.train.support import write

ENV = '\n[[env]]\nid = "reverse-text"\n'


def load(tmp_path, text: str, overrides=()):
    return load_train_config(write(tmp_path, text), list(overrides))


def error(tmp_path, text: str, overrides=()) -> str:
    with pytest.raises(TrainConfigError) as info:
        load(tmp_path, text, overrides)
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize(("text", "path", "value"), [
    ('model = "Qwen/Qwen3-4B"', "model.name", "Qwen/Qwen3-4B"),
    ('model_name = "Qwen/Qwen3-4B"', "model.name", "Qwen/Qwen3-4B"),
    ("batch_size = 32", "orchestrator.batch_size", 32),
    ("rollouts_per_example = 4", "orchestrator.rollouts_per_example", 4),
    ("oversampling_factor = 2.0", "orchestrator.oversampling_factor", 2.0),
    ("max_async_level = 3", "orchestrator.max_async_level", 3),
    ("max_concurrent = 64", "orchestrator.max_concurrent", 64),
    ('trajectory_strategy = "branching"', "orchestrator.trajectory_strategy", "branching"),
    ("learning_rate = 3e-6", "trainer.optim.lr", 3e-6),
    ("lr = 3e-6", "trainer.optim.lr", 3e-6),
    ("lora_rank = 8", "trainer.model.lora.rank", 8),
    ("lora_alpha = 64", "trainer.model.lora.alpha", 64),
    ("inference_gpu_ids = [0, 1]\ntensor_parallel_size = 2", "inference.tensor_parallel_size", 2),
    ("use_difficulty_filtering = true", "orchestrator.buffer.online_difficulty_filtering", True),
    ("difficulty_threshold = 0.05", "orchestrator.buffer.min_reward_variance", 0.05),
    ("use_lora = true", "trainer.model.lora.rank", 16),
    ("pipeline_parallel_size = 1", "inference.tensor_parallel_size", 1),
    ("[sampling]\nmax_tokens = 99\ntemperature = 0.7\ntop_p = 1.0", "orchestrator.sampling.max_tokens", 99),
    ("[checkpointing]\nsave_every_n_steps = 7", "trainer.ckpt.interval", 7),
    ("[checkpointing]\nkeep_n_checkpoints = 2", "trainer.ckpt.keep_last", 2),
    ("[trainer.ckpt]\nkeep = 4", "trainer.ckpt.keep_last", 4),
    ("[trainer.ckpt]\nkeep_last = 3\nkeep_interval = 50", "trainer.ckpt.keep_interval", 50),
    ('[inference]\ndtype = "float16"', "inference.model.dtype", "float16"),
    ('[inference.model]\ndtype = "bfloat16"', "inference.model.dtype", "bfloat16"),
    ('[inference.model]\ntool_call_parser = "hermes"\nenable_auto_tool_choice = true', "inference.model.tool_call_parser", "hermes"),
    ('[inference.model]\nreasoning_parser = "qwen3"', "inference.model.reasoning_parser", "qwen3"),
    ('[trainer.model]\noptimization_dtype = "bfloat16"', "trainer.model.optimization_dtype", "bfloat16"),
    ('[trainer.model]\nreduce_dtype = "bfloat16"', "trainer.model.reduce_dtype", "bfloat16"),
    ("[trainer.model]\nfsdp_cpu_offload = true", "trainer.model.fsdp_cpu_offload", True),
    ("[trainer.model.ac]\nfreq = 2", "trainer.model.ac.freq", 2),
    ('[trainer.tokenizer]\nname = "local"', "trainer.tokenizer.name", "local"),
])
def test_each_spelling_lands_on_its_key(tmp_path, text, path, value):
    config = load(tmp_path, "batch_size = 16\nrollouts_per_example = 4\n" * ("batch_size" not in text
                                                                            and "rollouts" not in text) + text + ENV)
    node = config
    for part in path.split("."):
        node = getattr(node, part)
    assert node == value


def test_sampling_keys_go_under_orchestrator_sampling():
    # moved as written; values other than the neutral ones are then refused by the sampling section
    data, _ = normalize({"sampling": {"top_p": 0.9, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1}})
    assert data["orchestrator"]["sampling"] == {"top_p": 0.9, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1}


def test_env_weight_and_a_single_env_table(tmp_path):
    config = load(tmp_path, 'model = "local"\n[env]\nid = "reverse-text"\nweight = 3\n')
    assert [(e.id, e.ratio) for e in config.orchestrator.env] == [("reverse-text", 3.0)]
    config = load(tmp_path, 'model = "local"\n[[env]]\nid = "reverse-text"\nweight = 1\n[[env]]\nid = "alphabet-sort"\nweight = 3\n')
    assert [e.ratio for e in config.orchestrator.env] == [1.0, 3.0]
    v04 = load(tmp_path, '[orchestrator]\nbatch_size = 8\nrollouts_per_example = 4\n[[orchestrator.env]]\nid = "reverse-text"\nweight = 2\n')
    assert v04.orchestrator.env[0].ratio == 2.0


def test_num_gpus_splits_inference_and_trainer(tmp_path):
    one = load(tmp_path, "num_gpus = 1" + ENV)
    assert one.inference_gpu_ids == [0] and one.trainer_gpu_ids == [0]
    four = load(tmp_path, "num_gpus = 4" + ENV)
    assert four.inference_gpu_ids == [0, 1, 2] and four.trainer_gpu_ids == [3]
    assert four.inference.data_parallel_size == 3  # one vLLM replica per inference GPU
    tp = load(tmp_path, "num_gpus = 3\ntensor_parallel_size = 2" + ENV)
    assert tp.inference.tensor_parallel_size == 2 and tp.inference.data_parallel_size == 1


def test_inference_gpu_ids_alone_mean_data_parallel(tmp_path):
    config = load(tmp_path, "inference_gpu_ids = [0, 1, 2]\ntrainer_gpu_ids = [3]" + ENV)
    assert config.inference.data_parallel_size == 3 and config.inference.tensor_parallel_size == 1
    explicit = load(tmp_path, "inference_gpu_ids = [0, 1]\n[inference]\ntensor_parallel_size = 2" + ENV)
    assert explicit.inference.data_parallel_size == 1
    overridden = load(tmp_path, "inference_gpu_ids = [0, 1]" + ENV, ["inference.tensor_parallel_size=2"])
    assert overridden.inference.data_parallel_size == 1


@pytest.mark.parametrize(("text", "fragment"), [
    ("use_lora = false", "LoRA adapters only"),
    ("pipeline_parallel_size = 2", "pipeline_parallel_size > 1 is not supported"),
    ('[env.harness]\nmax_turns = 8', "BYO-harness"),
    ('model = "a"\nmodel_name = "b"', "keep one"),
    ("learning_rate = 1e-5\n[trainer.optim]\nlr = 1e-4", "learning_rate and trainer.optim.lr"),
    ("num_gpus = 0", "num_gpus must be a positive integer"),
    ("num_gpus = 2\ninference_gpu_ids = [0]", "keep one"),
    ('[trainer.tokenizer]\nname = "other/model"', "trainer.tokenizer.name"),
    ("max_concurrent = 2\nrollouts_per_example = 4\nbatch_size = 8", "max_concurrent (2) must be at least"),
    ('[inference]\ndtype = "int8"', "inference.dtype"),
])
def test_what_cannot_apply_fails_with_one_line(tmp_path, text, fragment):
    env = ENV if "[env" not in text else '\n[[env]]\nid = "reverse-text"\n'
    if "[env.harness]" in text:
        text, env = '[env]\nid = "reverse-text"\n[env.harness]\nmax_turns = 8', ""
    assert fragment in error(tmp_path, text + env)


def test_set_uses_the_guide_names_too(tmp_path):
    config = load(tmp_path, 'model = "local"\n[[env]]\nid = "reverse-text"\n',
                  ["learning_rate=5e-5", "env[0].weight=4", "checkpointing.keep_n_checkpoints=2", "batch_size=16"])
    assert config.trainer.optim.lr == 5e-5 and config.orchestrator.env[0].ratio == 4.0
    assert config.trainer.ckpt.keep_last == 2 and config.orchestrator.batch_size == 16
    assert translate_override_key("orchestrator.env[1].weight") == "orchestrator.env[1].ratio"
    assert translate_override_key("model") == "model.name"


def test_every_alias_target_is_a_real_key():
    from prime_cli.train.config import RLConfig
    from prime_cli.train.messages import section_keys

    pending = {"orchestrator.sampling"}  # hosted [sampling] keys are checked by the sampling section itself
    for _, target in ALIASES:
        parts = tuple(target.replace("[]", "").split("."))
        if ".".join(parts) in pending:
            continue
        assert parts[-1] in (section_keys(RLConfig, parts[:-1]) or []), target


def test_thresholds_without_filtering_warn(tmp_path):
    config = load(tmp_path, "[buffer]\neasy_threshold = 0.9\nhard_threshold = 0.1" + ENV)
    assert any("online_difficulty_filtering" in note for note in config_notes(config))
    config = load(tmp_path, "[buffer]\neasy_threshold = 0.9\nonline_difficulty_filtering = true" + ENV)
    assert config_notes(config) == []


def test_env_file_is_checked_and_its_values_are_never_shown(tmp_path):
    (tmp_path / "secrets.env").write_text("API_KEY=abc123secret\nthis line is wrong abc123secret\n")
    message = error(tmp_path, 'env_file = ["secrets.env"]' + ENV)
    assert "line 2" in message and "abc123secret" not in message
    assert "no such file" in error(tmp_path, 'env_file = ["missing.env"]' + ENV)
    (tmp_path / "secrets.env").write_text("API_KEY=abc123secret\n")
    config = load(tmp_path, 'env_file = ["secrets.env"]' + ENV)
    assert config.env_file == [str((tmp_path / "secrets.env").resolve())]
    assert "abc123secret" not in config.model_dump_json()


def test_a_top_level_key_after_a_table_header_is_taken_for_the_top_level_key(tmp_path):
    from prime_cli.train.loading import load_train_config_with_notes

    config, notes = load_train_config_with_notes(write(tmp_path, 'model = "local"\n[[env]]\nid = "reverse-text"\n'
                                                                  "max_steps = 3\nbatch_size = 16\n"))
    assert config.max_steps == 3 and config.orchestrator.batch_size == 16  # a guide spelling lands on its key
    assert notes[0] == ("note: max_steps is a top-level key, but it follows the [[env]] header, so TOML reads it as "
                        "env[0].max_steps; it is taken as the top-level max_steps (move it above the first [table] "
                        "header)")
    # a key the table has is that table's (orchestrator.seed), and free-form args are the environment's
    config, notes = load_train_config_with_notes(write(tmp_path, "seed = 1\n[orchestrator]\nbatch_size = 8\n"
                                                                  "rollouts_per_example = 4\nseed = 2" + ENV))
    assert (config.seed, config.orchestrator.seed, notes) == (1, 2, [])
    config, notes = load_train_config_with_notes(write(tmp_path, '[[env]]\nid = "reverse-text"\n[env.args]\n'
                                                                  "max_steps = 3\n"))
    assert (config.orchestrator.env[0].args, config.max_steps, notes) == ({"max_steps": 3}, 20, [])
    assert error(tmp_path, 'max_steps = 2\n[wandb]\nmax_steps = 3' + ENV) == (
        "max_steps is set at the top level and again after the [wandb] header (TOML reads that line as "
        "wandb.max_steps): keep one of them")
