"""What the launcher does with config keys: env_file values reach every part and never the disk, vLLM's
dtype and tool/reasoning parser flags, and how multi-turn rollouts become samples."""

from __future__ import annotations

from pathlib import Path

from test_lora_launcher import config, fake_parts

from prime_cli.train.config import RLConfig
from prime_lora import launcher
from prime_lora.orchestrator import samples
from prime_lora.orchestrator.samples import rollout_samples

SECRET = "sk-test-0123456789abcdef"

TRAINER_SEES = """
import json, os, sys, pathlib, time
time.sleep(2)  # until the stand-in vLLM is up (a trainer ending during start is a failure)
out = pathlib.Path(sys.argv[1])
(out / "trainer_saw.txt").write_text(os.environ.get("MY_API_KEY", "missing"))
(out / "weights" / "step_1").mkdir(parents=True)
with open(out / "metrics.jsonl", "a") as f:
    f.write(json.dumps({"step": 1, "reward_mean": 0.5, "reward_std": 0.1}) + "\\n")
"""


def test_env_file_values_reach_the_parts_and_are_never_written(tmp_path, monkeypatch, capsys):
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"# a comment\nexport MY_API_KEY='{SECRET}'\n\nOTHER=1\n")
    saw_orchestrator = tmp_path / "orchestrator_saw.txt"
    orchestrator = f"import os; open({str(saw_orchestrator)!r}, 'w').write(os.environ.get('MY_API_KEY', 'missing'))"
    fake_parts(monkeypatch, tmp_path, TRAINER_SEES, orchestrator)
    cfg = config(tmp_path, max_steps=1, env_file=[str(secrets)])
    assert launcher.launch(cfg, Path(cfg.output_dir)) == 0
    out = tmp_path / "out"
    assert (out / "trainer_saw.txt").read_text() == SECRET
    assert saw_orchestrator.read_text() == SECRET
    assert "MY_API_KEY" not in dict(__import__("os").environ)  # the launcher's own environment is unchanged
    written = [p for p in out.rglob("*") if p.is_file() and p.name != "trainer_saw.txt"]
    assert any(p.name == "config.json" for p in written)
    assert all(SECRET not in p.read_text(errors="replace") for p in written)
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err


def test_vllm_flags_follow_inference_dtype_and_parsers(tmp_path):
    cfg = config(tmp_path, inference={"model": {"dtype": "float16", "enable_auto_tool_choice": True,
                                                 "tool_call_parser": "hermes", "reasoning_parser": "qwen3"}})
    args = launcher.inference_options(cfg, "/models/tiny", "tiny").extra_args
    assert args[args.index("--dtype") + 1] == "float16"
    assert "--enable-auto-tool-choice" in args
    assert args[args.index("--tool-call-parser") + 1] == "hermes"
    assert args[args.index("--reasoning-parser") + 1] == "qwen3"
    plain = launcher.inference_options(config(tmp_path), "/models/tiny", "tiny").extra_args
    assert "--dtype" not in plain and "--tool-call-parser" not in plain
    # without [inference.model] dtype, vLLM follows model.dtype
    by_model = launcher.inference_options(config(tmp_path, model={"name": "local", "dtype": "bfloat16"}),
                                          "/models/tiny", "tiny").extra_args
    assert by_model[by_model.index("--dtype") + 1] == "bfloat16"


def _two_turns(rewrites: bool) -> dict:
    second_prompt = [1, 2, 3, 4, 5, 9, 9] if not rewrites else [1, 2, 7, 9, 9]  # turn 1 = prompt [1,2,3] + [4,5]
    return {"trajectory": [
        {"prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5], "completion_logprobs": [-0.1, -0.2]},
        {"prompt_token_ids": second_prompt, "completion_token_ids": [6], "completion_logprobs": [-0.3]}]}


def test_trajectory_strategy(capsys, monkeypatch):
    monkeypatch.setattr(samples, "_warned_split", False)  # said once per process: another test may have said it
    merged = rollout_samples(_two_turns(rewrites=False), 64, "interleaved")
    assert len(merged) == 1 and merged[0]["input_ids"] == [1, 2, 3, 4, 5, 9, 9, 6]
    assert merged[0]["loss_mask"] == [0, 0, 0, 1, 1, 0, 0, 1]
    branching = rollout_samples(_two_turns(rewrites=False), 64, "branching")
    assert [s["input_ids"] for s in branching] == [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 9, 9, 6]]
    assert capsys.readouterr().err == ""
    split = rollout_samples(_two_turns(rewrites=True), 64, "interleaved")
    assert len(split) == 2
    assert "trajectory_strategy" in capsys.readouterr().err  # said once, with the setting to use


def test_config_json_of_a_run_holds_env_file_names_only(tmp_path):
    secrets = tmp_path / "s.env"
    secrets.write_text(f"K={SECRET}\n")
    cfg = RLConfig.model_validate({"env_file": [str(secrets)], "orchestrator": {
        "batch_size": 2, "rollouts_per_example": 2, "env": [{"id": "reverse-text"}]}})
    assert SECRET not in cfg.model_dump_json() and str(secrets) in cfg.model_dump_json()


def test_a_step_whose_rollouts_all_failed_says_so_and_points_at_the_orchestrator_log():
    from prime_lora.progress import step_line

    row = {"step": 4, "reward_mean": 0.0, "reward_std": 0.0, "skipped": True, "effective_batch_size": 0,
           "dropped_rollouts": 32, "groups_kept": 0}
    line = step_line(row, 10, "out/logs/orchestrator.log")
    assert "all rollouts failed (32 dropped)" in line and "out/logs/orchestrator.log" in line
    assert "non-finite" not in line
    ordinary = step_line({"step": 4, "skipped": True, "effective_batch_size": 32}, 10, "out/logs/orchestrator.log")
    assert "SKIPPED (non-finite loss or gradient)" in ordinary and "all rollouts failed" not in ordinary
