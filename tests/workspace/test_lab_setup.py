"""`prime lab setup`: the workspace it writes, idempotence, and configs the other commands accept."""

import tomllib

import pytest

from prime_cli.clients.registry import load_registry
from prime_cli.evals.config import load_toml_configs
from prime_cli.gepa.config import GepaConfig
from prime_cli.train.loading import load_train_config
from prime_cli.workspace.templates import EXAMPLES
from tests.environments.conftest import data_root
from tests.evals.cli_support import read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

ENV_IDS = [e.env_id for e in EXAMPLES]


@pytest.fixture
def workspace(tmp_path):
    result = run_prime(["lab", "setup"], tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path


def test_setup_writes_configs_environments_and_gitignore(workspace):
    registry = load_registry(workspace / "configs" / "endpoints.toml")
    assert "local" not in registry, "`local` is built in; an entry would shadow it"
    assert {s.key_var for specs in registry.values() for s in specs} >= {
        "OPENAI_API_KEY", "OPENROUTER_API_KEY"}
    for env_id in ENV_IDS:
        module = env_id.replace("-", "_")
        assert (workspace / "environments" / module / "pyproject.toml").is_file(), env_id
        assert (workspace / "configs" / "eval" / f"{env_id}.toml").is_file()
    assert (workspace / "environments" / "wordle" / "wordle" / "words.txt").is_file()
    assert not list((workspace / "environments").rglob("*.egg-info"))
    assert "outputs/" in (workspace / ".gitignore").read_text()


def test_every_config_is_accepted_by_its_reader(workspace):
    for env_id in ENV_IDS:
        (config,) = load_toml_configs(workspace / "configs" / "eval" / f"{env_id}.toml")
        assert config.env_id == env_id and config.model == "local" and config.save_results
        gepa = GepaConfig(**tomllib.loads((workspace / "configs" / "gepa" / f"{env_id}.toml").read_text()))
        assert gepa.env_id == env_id and gepa.reflection_model
        hosted = tomllib.loads((workspace / "configs" / "rl" / f"{env_id}.toml").read_text())
        assert hosted["env"] == [{"id": env_id}] and isinstance(hosted["model"], str)  # the guide's hosted shape
        assert hosted["batch_size"] % hosted["rollouts_per_example"] == 0 and "orchestrator" not in hosted
        rl = tomllib.loads((workspace / "configs" / "prime-rl" / f"{env_id}.toml").read_text())
        assert rl["orchestrator"]["env"] == [{"id": env_id}]
        assert rl["orchestrator"]["batch_size"] % rl["orchestrator"]["rollouts_per_example"] == 0
        assert {"inference_gpu_ids", "trainer_gpu_ids", "max_steps", "seq_len", "model", "trainer"} <= set(rl)
        # both shapes mean the same run
        one = load_train_config(workspace / "configs" / "rl" / f"{env_id}.toml")
        other = load_train_config(workspace / "configs" / "prime-rl" / f"{env_id}.toml")
        assert one.model_dump() == other.model_dump()


def test_prime_rl_flag_writes_the_v04_set_and_says_nothing_was_cloned(tmp_path):
    result = run_prime(["lab", "setup", "--prime-rl"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "not cloned" in result.stdout and "prime train configs/prime-rl/" in result.stdout
    assert (tmp_path / "configs" / "prime-rl" / "reverse-text.toml").is_file()
    assert not (tmp_path / "configs" / "rl").exists()


def test_setup_is_idempotent_and_keeps_files_you_changed(workspace):
    config = workspace / "configs" / "eval" / "wordle.toml"
    config.write_text(config.read_text().replace("num_examples = 10", "num_examples = 3"))
    again = run_prime(["lab", "setup"], workspace)
    assert again.returncode == 0, again.stderr
    assert "kept (changed by you; --force overwrites): configs/eval/wordle.toml" in again.stdout
    assert "created" not in again.stdout.replace("created 0", "")
    assert "num_examples = 3" in config.read_text()
    forced = run_prime(["lab", "setup", "--force"], workspace)
    assert "overwritten: configs/eval/wordle.toml" in forced.stdout and "num_examples = 10" in config.read_text()


def test_an_untouched_file_follows_a_newer_template(workspace):
    gitignore = workspace / ".gitignore"
    manifest = workspace / ".prime" / "lab.json"
    import hashlib
    import json

    old = "outputs/\n"  # pretend an older prime wrote this and recorded it
    gitignore.write_text(old)
    data = json.loads(manifest.read_text())
    data[".gitignore"] = hashlib.sha256(old.encode()).hexdigest()
    manifest.write_text(json.dumps(data))
    result = run_prime(["lab", "setup"], workspace)
    assert "updated: .gitignore" in result.stdout and "environments/*/outputs/" in gitignore.read_text()


def test_eval_configs_run_in_the_new_workspace(workspace):
    with ScriptedOpenAIServer() as server:
        result = run_prime(["eval", "run", "configs/eval/reverse-text.toml", "-m", "m", "-b", server.url, "-n", "3"],
                           workspace, {"PRIME_DATA_DIR": str(data_root())})
        gsm = run_prime(["eval", "run", "configs/eval/gsm8k.toml", "-m", "m", "-b", server.url, "-n", "2", "-r", "1"],
                        workspace, {"PRIME_DATA_DIR": str(data_root())})
    assert result.returncode == 0, result.stderr
    assert gsm.returncode == 0, gsm.stderr
    runs = list((workspace / "environments" / "reverse_text" / "outputs" / "evals").rglob("results.jsonl"))
    assert len(runs) == 1 and len(read_rows(runs[0].parent)) == 6  # 3 examples x 2 rollouts from the config


def test_setup_refuses_a_file_as_the_target(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("x")
    result = run_prime(["lab", "setup", "--path", str(target)], tmp_path)
    assert result.returncode == 2 and "is a file" in result.stderr


def test_the_commented_index_table_parses_once_uncommented_and_evals_still_run(workspace):
    from prime_cli.workspace.indexes import INDEX_KEYS, endpoints_indexes

    path = workspace / "configs" / "endpoints.toml"
    text = path.read_text()
    start = text.index("# [[index]]")
    block = text[start:text.index("\n#\n", start)]
    assert all(f"# {key} = " in block for key in INDEX_KEYS), block  # every key shown, each explained
    assert "~/.pypirc" in text[start:]
    uncommented = "\n".join(line[2:] for line in block.splitlines())
    with ScriptedOpenAIServer() as server:
        path.write_text(text + "\n" + uncommented + "\n\n[[endpoint]]\nendpoint_id = \"scripted\"\nmodel = \"m\"\n"
                        f"url = \"{server.url}\"\n")
        result = run_prime(["eval", "run", "reverse-text", "-m", "scripted", "-n", "2", "-r", "1"], workspace)
    assert result.returncode == 0, result.stderr
    [index] = endpoints_indexes(path)  # what configured_indexes reads first, ~/.pypirc aside
    assert (index.name, index.simple_url, index.upload_url, index.user, index.token_var, index.visibility) == (
        "my-team", "https://pypi.example.com/simple/", "https://pypi.example.com/", "__token__",
        "MY_TEAM_INDEX_TOKEN", "private")
