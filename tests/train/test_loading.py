"""Config loading: both shapes, `--set`, and the one-line message of each kind of mistake."""

import pytest

from prime_cli.train.config import RLConfig
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.loading import check_environments, load_train_config
from tests.train.support import MINIMAL, write


def load_error(tmp_path, text: str, overrides=()) -> str:
    with pytest.raises(TrainConfigError) as info:
        load_train_config(write(tmp_path, text), list(overrides))
    message = str(info.value)
    assert "\n" not in message and "Value error" not in message and "pydantic" not in message
    return message


def test_v04_shape(tmp_path):
    config = load_train_config(write(tmp_path, """
        max_steps = 7
        seq_len = 1024
        [model]
        name = "Qwen/Qwen3-0.6B"
        [trainer.optim]
        lr = 3e-5
        [trainer.model.lora]
        rank = 4
        [orchestrator]
        batch_size = 16
        rollouts_per_example = 4
        [orchestrator.sampling]
        max_tokens = 64
        [[orchestrator.env]]
        id = "reverse-text"
        args = { answer_without_tags = true }
        [[orchestrator.env]]
        id = "alphabet-sort"
        ratio = 2
        [inference.model]
        max_model_len = 1024
    """), [])
    assert isinstance(config, RLConfig)
    assert (config.max_steps, config.model.name, config.trainer.optim.lr) == (7, "Qwen/Qwen3-0.6B", 3e-5)
    assert config.trainer.model.lora.rank == 4 and config.orchestrator.sampling.max_tokens == 64
    assert [(e.id, e.args, e.ratio) for e in config.orchestrator.env] == [
        ("reverse-text", {"answer_without_tags": True}, 1.0), ("alphabet-sort", {}, 2.0)]


def test_hosted_shape_maps_onto_v04(tmp_path):
    config = load_train_config(write(tmp_path, """
        model = "Qwen/Qwen3-0.6B"
        max_steps = 12
        batch_size = 32
        rollouts_per_example = 8
        seq_len = 1024
        learning_rate = 2e-5
        lora_rank = 8
        [inference.model]
        max_model_len = 1024
        [sampling]
        temperature = 0.7
        max_tokens = 100
        top_p = 1.0
        [[env]]
        id = "reverse-text"
        args = { answer_without_tags = true }
        ratio = 3
    """), [])
    assert config.model.name == "Qwen/Qwen3-0.6B" and config.max_steps == 12 and config.seq_len == 1024
    assert (config.orchestrator.batch_size, config.orchestrator.rollouts_per_example) == (32, 8)
    assert config.trainer.optim.lr == 2e-5 and config.trainer.model.lora.rank == 8
    sampling = config.orchestrator.sampling
    assert (sampling.temperature, sampling.max_tokens, sampling.top_p) == (0.7, 100, 1.0)
    assert config.orchestrator.env[0].args == {"answer_without_tags": True} and config.orchestrator.env[0].ratio == 3


def test_hosted_lr_alias_and_hosted_messages(tmp_path):
    config = load_train_config(write(tmp_path, 'model = "local"\nlr = 1e-3\n[[env]]\nid = "reverse-text"\n'), [])
    assert config.trainer.optim.lr == 1e-3
    message = load_error(tmp_path, 'model = "local"\nbatch_size = 30\nrollouts_per_example = 8\n[[env]]\nid = "x"\n')
    assert message == "batch_size must be divisible by rollouts_per_example (got 30 and 8)"
    both = load_error(tmp_path, 'model = "local"\nlr = 1e-3\nlearning_rate = 1e-4\n[[env]]\nid = "x"\n')
    assert "lr" in both and "learning_rate" in both and "keep one" in both


def test_set_overrides(tmp_path):
    path = write(tmp_path, MINIMAL)
    config = load_train_config(path, ["trainer.optim.lr=3e-4", "model.name=Qwen/Qwen3-0.6B", "max_steps=3",
                                      "orchestrator.env[0].args.answer_without_tags=true",
                                      "trainer_gpu_ids=[1, 2]", "wandb.project=demo"])
    assert config.trainer.optim.lr == 3e-4 and config.model.name == "Qwen/Qwen3-0.6B" and config.max_steps == 3
    assert config.orchestrator.env[0].args == {"answer_without_tags": True}
    assert config.trainer_gpu_ids == [1, 2] and config.wandb.project == "demo"
    hosted = write(tmp_path, 'model = "local"\n[[env]]\nid = "reverse-text"\n', "hosted.toml")
    assert load_train_config(hosted, ["batch_size=16", "rollouts_per_example=4"]).orchestrator.batch_size == 16


def test_output_dir_argument_wins(tmp_path):
    path = write(tmp_path, 'output_dir = "x"\n' + MINIMAL)
    assert load_train_config(path, []).output_dir == "x"
    assert load_train_config(path, [], output_dir="elsewhere").output_dir == "elsewhere"


@pytest.mark.parametrize("override, expected", [
    ("nokey", "--set expects KEY=VALUE (got 'nokey')"),
    ("=3", "--set expects KEY=VALUE (got '=3')"),
    ("a..b=1", "is not a dotted key"),
    ("orchestrator.env[3].id=x", "has 1 entries"),
    ("orchestrator.batch_size.x=1", "orchestrator.batch_size is a value, not a table"),
])
def test_bad_set(tmp_path, override, expected):
    assert expected in load_error(tmp_path, MINIMAL, [override])


def test_divisible_message(tmp_path):
    message = load_error(tmp_path, MINIMAL.replace("batch_size = 16", "batch_size = 30").replace(
        "rollouts_per_example = 4", "rollouts_per_example = 8"))
    assert message == "orchestrator.batch_size must be divisible by orchestrator.rollouts_per_example (got 30 and 8)"


def test_seq_len_below_max_model_len(tmp_path):
    message = load_error(tmp_path, "seq_len = 512\n" + MINIMAL)
    assert message.startswith("seq_len (512) is below inference.model.max_model_len (2048)")
    assert "raise seq_len or lower max_model_len" in message


def test_mismatched_model_names(tmp_path):
    message = load_error(tmp_path, MINIMAL + '[model]\nname = "a"\n[trainer.model]\nname = "b"\n')
    assert message.startswith("trainer.model.name ('b') differs from model.name ('a')")


def test_unknown_key_with_suggestion(tmp_path):
    path = write(tmp_path, MINIMAL + "[trainer.optim]\nlrr = 1e-4\n")
    with pytest.raises(TrainConfigError, match=r"^unknown key trainer\.optim\.lrr in .*config\.toml "
                                               r"\(did you mean trainer\.optim\.lr\?\)$"):
        load_train_config(path, [])
    assert load_error(tmp_path, MINIMAL, ["orchestrator.bach_size=8"]) == (
        "unknown key orchestrator.bach_size in --set (did you mean orchestrator.batch_size?)")
    far = load_error(tmp_path, MINIMAL + "[inference]\nzzz = 1\n")
    assert far.startswith("unknown key inference.zzz") and "keys of inference: model, host" in far


def test_missing_required_keys(tmp_path):
    assert load_error(tmp_path, "[orchestrator]\nbatch_size = 8\n") == (
        'orchestrator.env is empty: add an [[orchestrator.env]] id = "ENV" to train on (or [[data.source]] '
        'dataset = PATH for SFT on a data set)')
    assert load_error(tmp_path, "[orchestrator]\nenv = []\n").startswith("orchestrator.env is empty")
    assert load_error(tmp_path, "max_steps = 2\n").startswith("orchestrator is required")
    assert load_error(tmp_path, MINIMAL + "[[orchestrator.env]]\nargs = {}\n") == (
        "orchestrator.env[1].id is required: add id = ... under [orchestrator.env[1]]")


def test_type_and_range_messages(tmp_path):
    assert load_error(tmp_path, MINIMAL, ["max_steps=0"]) == "--set max_steps must be at least 1 (got 0)"
    assert load_error(tmp_path, MINIMAL, ["max_steps=many"]) == "--set max_steps must be an integer (got 'many')"
    assert load_error(tmp_path, "max_steps = 0\n" + MINIMAL) == "max_steps must be at least 1 (got 0)"
    assert load_error(tmp_path, MINIMAL + "[trainer.loss]\nratio_low = 2.0\n").startswith(
        "trainer.loss needs ratio_low < 1 < ratio_high")
    assert load_error(tmp_path, MINIMAL, ["max_steps=0", "seed=x"]).endswith("(and 1 more problem)")


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(TrainConfigError, match=r"config file .*nope\.toml does not exist \(examples: configs/rl/\*\.toml\)"):
        load_train_config(tmp_path / "nope.toml", [])
    message = load_error(tmp_path, "max_steps = \n")
    assert "config.toml is not valid TOML" in message and "line 1" in message


def test_check_environments(tmp_path):
    good = load_train_config(write(tmp_path, MINIMAL), ["orchestrator.env[0].args.answer_without_tags=true"])
    check_environments(good)
    bad = load_train_config(write(tmp_path, MINIMAL.replace("reverse-text", "nope")), [])
    with pytest.raises(TrainConfigError, match=r"^orchestrator\.env\[0\]\.id: cannot load environment 'nope' "
                                               r"\(no environment 'nope'"):
        check_environments(bad)
    bad_args = load_train_config(write(tmp_path, MINIMAL), ["orchestrator.env[0].args.bogus=1"])
    with pytest.raises(TrainConfigError, match=r"cannot load environment 'reverse-text' \(.*bogus"):
        check_environments(bad_args)


def test_a_runs_resolved_config_json_loads_back(tmp_path):
    from prime_cli.train.config import RLConfig
    from prime_cli.train.loading import load_train_config

    config = RLConfig.model_validate({"max_steps": 3, "orchestrator": {"batch_size": 8, "env": [{"id": "reverse-text"}]}})
    path = tmp_path / "config.json"
    path.write_text(config.model_dump_json(indent=2))
    assert load_train_config(path, ["max_steps=5"]).model_dump() == {**config.model_dump(), "max_steps": 5}
    path.write_text("{not json")
    from prime_cli.train.errors import TrainConfigError

    with pytest.raises(TrainConfigError, match="not valid JSON"):
        load_train_config(path)
