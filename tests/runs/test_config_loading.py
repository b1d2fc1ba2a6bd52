"""The one config loader of eval, GEPA and training: reading the file and naming each bad key as written."""

from __future__ import annotations

import pytest

from prime_cli.envs.errors import EnvConfigError
from prime_cli.evals.config import load_toml_configs
from prime_cli.gepa.config import GepaConfig, config_for
from prime_cli.runs.config_errors import ConfigValueError, problem_message
from prime_cli.runs.config_loading import build_model
from prime_cli.train.errors import TrainConfigError
from prime_cli.train.loading import read_toml


def _load_eval(path):
    return load_toml_configs(path)


def _load_gepa(path):
    return config_for(str(path), {})


@pytest.mark.parametrize("load", [_load_eval, _load_gepa])
def test_a_folder_or_an_unreadable_file_is_one_error_line_for_eval_and_gepa(load, tmp_path):
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    with pytest.raises(EnvConfigError, match=r"folder\.toml is not a file; give a TOML config \(examples: configs/"):
        load(folder)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'env_id = "caf\xe9"\n')
    with pytest.raises(EnvConfigError, match=r"latin\.toml: cannot read it \("):
        load(latin)


@pytest.mark.parametrize(("load", "error", "examples"), [
    (_load_eval, EnvConfigError, "configs/eval/*.toml"), (_load_gepa, EnvConfigError, "configs/gepa/*.toml"),
    (read_toml, TrainConfigError, "configs/rl/*.toml"),
])
def test_every_engine_words_a_missing_or_broken_file_alike(load, error, examples, tmp_path):
    with pytest.raises(error) as missing:
        load(tmp_path / "nope.toml")
    assert str(missing.value) == f"config file {tmp_path / 'nope.toml'} does not exist (examples: {examples})"
    broken = tmp_path / "broken.toml"
    broken.write_text("x = = 1\n")
    with pytest.raises(error, match=r"broken\.toml is not valid TOML: .*line 1"):
        load(broken)


def test_an_unknown_key_gets_the_closest_key_or_the_list_of_keys():
    with pytest.raises(ConfigValueError) as typo:
        build_model(GepaConfig, "g.toml", {"env_id": "e", "max_cals": 5})
    assert str(typo.value) == "g.toml: unknown key 'max_cals' (did you mean 'max_calls'?)"
    with pytest.raises(ConfigValueError) as far:
        build_model(GepaConfig, "g.toml", {"env_id": "e", "zzzq": 5})
    assert str(far.value).startswith("g.toml: unknown key 'zzzq' (keys: env_id, env_args, model, ")


def test_value_problems_name_the_key_in_the_file_or_the_flag_that_gave_it():
    with pytest.raises(ConfigValueError) as caught:
        build_model(GepaConfig, "command line", {"env_id": "e", "num_val": 0, "env": 1})
    assert str(caught.value) == ("command line: num_val must be at least 1 (got 0); "
                                 "command line: unknown key 'env' (did you mean 'env_id'?)")
    assert caught.value.describe({"num_val": "-N/--num-val"}).startswith("-N/--num-val must be at least 1 (got 0); ")


@pytest.mark.parametrize(("pydantic_words", "ours"), [
    ("Input should be greater than or equal to 1", "must be at least 1"),
    ("Input should be greater than 0", "must be more than 0"),
    ("Input should be less than or equal to 1", "must be at most 1"),
    ("Input should be less than 1", "must be less than 1"),
    ("Value error, must be 0 or more", "must be 0 or more"),
    ("Input should be a valid integer, unable to parse string as an integer", "must be a valid integer"),
])
def test_pydantic_bounds_read_as_the_cli_words_a_flags_range(pydantic_words, ours):
    assert problem_message({"msg": pydantic_words}) == ours
