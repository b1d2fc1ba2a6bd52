"""Adapters are evaluated as they were trained (issue 54, item 2): the checkpoint sweep takes the environment
args from the training run's config.json unless `-a` is given, and names a difference between the two. The
run folder is hand-made (config.json as `prime train` writes it, hand-made adapters); the scripted server
plays the vLLM server with runtime LoRA loading."""

from __future__ import annotations

import json
from pathlib import Path

from prime_cli.train.config import RLConfig
from tests.cli.conftest import metadata, run_dirs
from tests.cli.test_checkpoint_sweep import BASE, make_weights, reply_by_model, table_rows
from tests.support.cli import run_prime
from tests.support.scripted_server import ScriptedOpenAIServer, content_text

TRAINED = {"plain_text": True, "min_words": 8, "max_words": 12}


def write_run_config(run: Path, env_id: str = "reverse-text", args: dict | None = None) -> Path:
    """config.json as `prime train` writes it: the resolved RLConfig, dumped as JSON."""
    entry = {"id": env_id, "args": TRAINED if args is None else args}
    config = RLConfig.model_validate({"max_steps": 10, "output_dir": str(run), "model": {"name": "local"},
                                      "orchestrator": {"env": [entry], "eval": {"env": [entry]}}})
    path = run / "config.json"
    path.write_text(config.model_dump_json(indent=2))
    return path


def sweep(tmp_path: Path, server: ScriptedOpenAIServer, *extra: str, env_id: str = "reverse-text"):
    return run_prime(["eval", "run", env_id, "--weights-dir", str(tmp_path / "run" / "weights"),
                      "-b", server.url, "-n", "3", "-r", "2", *extra], tmp_path)


def env_args_by_model(tmp_path: Path) -> dict[str, dict]:
    return {metadata(d)["model"]: metadata(d).get("env_args") for d in run_dirs(tmp_path / "outputs")}


def lines(stderr: str, prefix: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(prefix)]


def test_the_sweep_evaluates_with_the_env_args_the_run_trained_with(tmp_path):
    make_weights(tmp_path, steps=(0, 10))
    config = write_run_config(tmp_path / "run")
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server)
        prompts = [r["json"]["messages"] for r in server.requests_to("/v1/chat/completions")]
    assert result.returncode == 0, result.stderr
    assert env_args_by_model(tmp_path) == {BASE: TRAINED, "step_0": TRAINED, "step_10": TRAINED}
    # the environment was built with them: plain_text asks for no tags, and the sentences have 8-12 words
    questions = [content_text([m for m in p if m["role"] == "user"][-1]["content"]) for p in prompts]
    assert questions and all(8 <= len(q.split()) <= 12 for q in questions), questions[:3]
    notes = lines(result.stderr, "note: ")
    assert len(notes) == 1 and str(config) in notes[0] and json.dumps(TRAINED) in notes[0], result.stderr
    assert lines(result.stderr, "warning: ") == []
    assert list(table_rows(result.stdout)) == ["base", "step_0", "step_10"]


def test_an_explicit_a_wins_and_its_difference_from_the_run_is_named_in_one_line(tmp_path):
    make_weights(tmp_path, steps=(0,))
    config = write_run_config(tmp_path / "run")
    given = {"min_words": 8, "max_words": 10}
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server, "-a", json.dumps(given))
    assert result.returncode == 0, result.stderr
    assert env_args_by_model(tmp_path) == {BASE: given, "step_0": given}
    warnings = lines(result.stderr, "warning: ")
    assert len(warnings) == 1, result.stderr
    assert str(config) in warnings[0]
    assert "plain_text not given here, true in training" in warnings[0]
    assert "max_words 10 here, 12 in training" in warnings[0] and "min_words" not in warnings[0]
    assert lines(result.stderr, "note: ") == []


def test_an_explicit_a_equal_to_the_runs_args_says_nothing(tmp_path):
    make_weights(tmp_path, steps=(0,))
    write_run_config(tmp_path / "run")
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server, "-a", json.dumps(dict(reversed(TRAINED.items()))))
    assert result.returncode == 0, result.stderr
    assert env_args_by_model(tmp_path) == {BASE: TRAINED, "step_0": TRAINED}
    assert lines(result.stderr, "warning: ") == [] and lines(result.stderr, "note: ") == []


def test_an_environment_the_run_did_not_train_on_gets_its_own_defaults_and_a_note(tmp_path):
    make_weights(tmp_path, steps=(0,))
    write_run_config(tmp_path / "run", env_id="wordle", args={"num_train_examples": 50})
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server)
    assert result.returncode == 0, result.stderr
    assert env_args_by_model(tmp_path) == {BASE: {}, "step_0": {}}
    notes = lines(result.stderr, "note: ")
    assert len(notes) == 1 and "wordle" in notes[0] and "reverse-text" in notes[0], result.stderr


def test_a_weights_folder_without_a_run_config_sweeps_as_before(tmp_path):
    make_weights(tmp_path, steps=(0,))
    with ScriptedOpenAIServer(reply=reply_by_model, models=[BASE]) as server:
        result = sweep(tmp_path, server)
    assert result.returncode == 0, result.stderr
    assert env_args_by_model(tmp_path) == {BASE: {}, "step_0": {}}
    assert lines(result.stderr, "note: ") == [] and lines(result.stderr, "warning: ") == []
