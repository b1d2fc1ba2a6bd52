"""[orchestrator.eval] (prime-rl v0.4's online eval section): each key, the schedule it gives, and the
`--dry-run` plan of a config shaped like the prime-rl guide's, through the installed `prime train`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from prime_cli.train.config import RLConfig
from tests.train.support import run_train, write


def config(max_steps: int = 20, **section) -> RLConfig:
    return RLConfig.model_validate({"max_steps": max_steps, "orchestrator": {
        "batch_size": 8, "rollouts_per_example": 4, "env": [{"id": "reverse-text"}],
        "eval": {"env": [{"id": "reverse-text"}], **section}}})


def test_without_the_section_nothing_is_evaluated():
    cfg = RLConfig.model_validate({"orchestrator": {"batch_size": 8, "rollouts_per_example": 4,
                                                    "env": [{"id": "reverse-text"}]}})
    assert cfg.orchestrator.eval is None


def test_defaults_are_prime_rls():
    section = config().orchestrator.eval
    assert (section.interval, section.num_examples, section.rollouts_per_example) == (100, -1, 1)
    assert (section.skip_eval_on_base, section.skip_eval_on_resume) == (False, True)


def test_interval_gives_step_0_every_multiple_and_the_last_step():
    assert config(interval=5).orchestrator.eval.steps(20) == [0, 5, 10, 15, 20]
    assert config(interval=8).orchestrator.eval.steps(20) == [0, 8, 16, 20]
    assert config(interval=100).orchestrator.eval.steps(3) == [0, 3]


def test_skip_eval_on_base_and_its_prime_rl_spelling():
    assert config(interval=5, skip_eval_on_base=True).orchestrator.eval.steps(10) == [5, 10]
    assert config(interval=5, eval_base_model=False).orchestrator.eval.skip_eval_on_base is True
    assert config(interval=5, eval_base_model=True).orchestrator.eval.steps(10) == [0, 5, 10]
    with pytest.raises(ValidationError, match="contradict"):
        config(eval_base_model=True, skip_eval_on_base=True)


def test_a_resume_at_k_evaluates_k_again_only_when_asked():
    assert config(interval=5).orchestrator.eval.steps(20, start=10) == [15, 20]
    assert config(interval=5, skip_eval_on_resume=False).orchestrator.eval.steps(20, start=10) == [10, 15, 20]


@pytest.mark.parametrize("key,value", [("interval", 0), ("num_examples", 0), ("num_examples", -2),
                                       ("rollouts_per_example", 0), ("bogus", 1)])
def test_bad_values_are_refused(key, value):
    with pytest.raises(ValidationError):
        config(**{key: value})


def test_env_entries_take_args_and_their_own_sizes(monkeypatch):
    import prime_cli.envs as vf
    from prime_lora.orchestrator.online_eval import load_eval_envs

    loaded = []
    monkeypatch.setattr(vf, "load_environment", lambda env_id, **args: loaded.append((env_id, args)) or object())
    cfg = RLConfig.model_validate({"orchestrator": {
        "batch_size": 8, "rollouts_per_example": 4, "env": [{"id": "reverse-text"}],
        "eval": {"num_examples": 4, "rollouts_per_example": 2, "env": [
            {"id": "reverse-text", "args": {"answer_without_tags": True}},
            {"id": "reverse-text", "num_examples": -1, "rollouts_per_example": 3}]}}})
    envs = load_eval_envs(cfg)
    assert loaded == [("reverse-text", {"answer_without_tags": True}), ("reverse-text", {})]
    assert [(e.name, e.num_examples, e.rollouts_per_example) for e in envs] == \
        [("reverse-text#0", 4, 2), ("reverse-text#1", -1, 3)]
    cfg.orchestrator.eval.env = []  # none listed: the training environments
    assert [(e.name, e.num_examples) for e in load_eval_envs(cfg)] == [("reverse-text", 4)]


PRIME_RL_GUIDE_EVAL = """
max_steps = 20

[model]
name = "local"

[orchestrator]
batch_size = 16
rollouts_per_example = 8

[[orchestrator.env]]
id = "reverse-text"

[orchestrator.eval]
interval = 5
num_examples = 4
rollouts_per_example = 2
eval_base_model = false

[[orchestrator.eval.env]]
id = "reverse-text"
args = { answer_without_tags = true }
"""


def test_a_prime_rl_guide_eval_section_dry_runs_and_the_plan_shows_it(tmp_path):
    result = run_train([str(write(tmp_path, PRIME_RL_GUIDE_EVAL)), "--dry-run"])
    assert result.returncode == 0, result.stderr
    assert ("online eval every 5 steps and the last step (steps 5, 10, 15, 20): "
            "reverse-text (4 examples x 2 rollouts)") in result.stdout
    assert "online_evals/step_N/<env>/" in result.stdout and "evals.jsonl" in result.stdout


def test_an_eval_environment_that_does_not_load_is_one_error_line(tmp_path):
    text = PRIME_RL_GUIDE_EVAL.replace('id = "reverse-text"\nargs', 'id = "no-such-env"\nargs')
    result = run_train([str(write(tmp_path, text)), "--dry-run"])
    assert result.returncode == 2 and result.stderr.startswith("error: orchestrator.eval.env[0].id: cannot load")
    assert len(result.stderr.strip().splitlines()) == 1
